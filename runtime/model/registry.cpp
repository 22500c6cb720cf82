#include "registry.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

#include "embedded.hpp"
#include "derived_builds.hpp"
#include "error.hpp"
#include "instance_table.hpp"
#include "json_reader.hpp"
#include "registry_snapshot.hpp"
#include "registry_values.hpp"

namespace cake {

const char* accumulate_name(Accumulate a) {
  switch (a) {
    case Accumulate::off: return "off";
    case Accumulate::fused: return "fused";
    case Accumulate::composed: return "composed";
  }
  return "?";
}

bool ArchPattern::matches(const Arch& device) const {
  if (or_newer)
    return device.major > arch.major || (device.major == arch.major && device.minor >= arch.minor);
  return device.major == arch.major && device.minor == arch.minor;
}

int64_t TileWaves::count(const std::map<std::string, int64_t>& dims, int sm_count) const {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t tiles = 1;
  for (const auto& [name, size] : per) {
    const auto it = dims.find(name);
    if (it == dims.end()) return -1;
    const int64_t n = it->second <= 0 ? 0 : (it->second - 1) / size + 1;
    tiles = n != 0 && tiles > kMax / n ? kMax : tiles * n;  // saturates: a hostile dim is many waves
  }
  const int64_t sms = std::max(sm_count, 1);
  return tiles / sms + (tiles % sms != 0);
}

std::vector<RegistrySource> Registry::embedded_sources() {
  std::vector<RegistrySource> out;
  for (const auto& f : embedded_registry())
    out.push_back({"<embedded>/" + std::string(f.name), std::string(f.content)});
  return out;
}

std::shared_ptr<const Registry> Registry::from_sources(const std::vector<RegistrySource>& src) {
  auto reg = std::shared_ptr<Registry>(new Registry());
  for (const auto& s : src) reg->parse(s.file, s.text);
  reg->index();
  reg->validate();
  return reg;
}

std::shared_ptr<const Registry> Registry::from_snapshot(std::string_view snapshot,
                                                        const std::vector<RegistrySource>& on_top) {
  auto reg = std::shared_ptr<Registry>(new Registry());
  RegistrySnapshot::read(snapshot, *reg);
  for (const auto& s : on_top) reg->parse(s.file, s.text);
  reg->index();
  if (!on_top.empty()) reg->validate();
  return reg;
}

void Registry::parse(const std::string& file, std::string_view text) {
  files_.push_back(file);
  const auto file_name = std::make_shared<const std::string>(file);
  const auto doc = JsonDoc::parse_view(text, file);  // `text` outlives it: the doc is gone at return
  JsonReader root(doc->root());
  root.allow_only({"comment", "family", "programs", "routes", "builds"});
  std::string family = root.has("family") ? root.at("family").str() : "";

  if (root.has("programs")) {
    auto ps = root.at("programs");
    ps.expect_array();
    for (size_t i = 0; i < ps.size(); ++i) {
      auto p = ps.at(i);
      p.allow_only({"name", "family", "template", "kernels", "archs", "params", "stand_in", "instance"});
      Program prog;
      prog.name = p.at("name").str();
      check_name(p.at("name"), prog.name);
      prog.family = p.has("family") ? p.at("family").str() : family;
      prog.templ = p.at("template").str();
      prog.kernels = read_strings(p.at("kernels"));
      if (prog.kernels.empty()) p.at("kernels").fail("a program needs at least one kernel");
      auto archs = p.at("archs");
      archs.expect_array();
      if (archs.size() == 0) archs.fail("a program needs at least one arch");
      for (size_t a = 0; a < archs.size(); ++a) prog.archs.push_back(read_arch(archs.at(a)));
      if (p.has("params")) {
        auto params = p.at("params");
        params.expect_object();
        // The params the runtime acts on generically: int32 words the launch owns for the
        // program's kernels (allocated and zeroed at prepare), and workspace bytes per SM.
        if (params.has("counters")) {
          const int64_t words = params.at("counters").int64();
          if (words < 0 || words > kMaxCounterWords)
            params.at("counters").fail("must be 0.." + std::to_string(kMaxCounterWords) + " int32 words, got " +
                                       std::to_string(words));
        }
        if (params.has("workspace_per_sm")) {
          const int64_t bytes = params.at("workspace_per_sm").int64();
          if (bytes < 0 || bytes > kMaxWorkspacePerSm)
            params.at("workspace_per_sm").fail("must be 0.." + std::to_string(kMaxWorkspacePerSm) + " bytes, got " +
                                               std::to_string(bytes));
        }
        prog.params = ProgramParams::from_text(params.value().source());
      }
      if (p.has("stand_in")) prog.stand_in = p.at("stand_in").str();
      if (p.has("instance")) read_instance(p.at("instance"), prog);
      prog.origin = {file_name, "/programs/" + std::to_string(i)};
      programs_.push_back(std::move(prog));
    }
  }

  if (root.has("builds")) {
    auto bs = root.at("builds");
    bs.expect_array();
    for (size_t i = 0; i < bs.size(); ++i) {
      auto b = bs.at(i);
      b.allow_only({"program", "arch", "min_cuda", "options", "source_hash"});
      Build build;
      build.program = b.at("program").str();
      build.arch = read_arch(b.at("arch"));
      auto v = CudaVersion::parse(b.at("min_cuda").str());
      if (!v) b.at("min_cuda").fail("'" + b.at("min_cuda").str() + "' is not a version (e.g. 12.8)");
      build.min_cuda = *v;
      build.options = read_strings(b.at("options"));
      build.source_hash = b.at("source_hash").str();
      const std::string& h = build.source_hash;
      if (h.size() != 64 || !std::all_of(h.begin(), h.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'); }))
        b.at("source_hash").fail("expected 64 lowercase hex digits (sha256)");
      build.origin = {file_name, "/builds/" + std::to_string(i)};
      builds_.push_back(std::move(build));
    }
  }

  if (root.has("routes")) {
    auto rs = root.at("routes");
    rs.expect_array();
    for (size_t i = 0; i < rs.size(); ++i) {
      auto r = rs.at(i);
      r.allow_only({"op", "family", "candidates"});
      Route route;
      route.op = r.at("op").str();
      check_name(r.at("op"), route.op);
      route.family = r.has("family") ? r.at("family").str() : family;
      auto cs = r.at("candidates");
      cs.expect_array();
      if (cs.size() == 0) cs.fail("a route needs at least one candidate");
      for (size_t c = 0; c < cs.size(); ++c) {
        auto cr = cs.at(c);
        cr.allow_only({"name", "stages", "window", "deterministic", "accumulate", "scratch", "note"});
        Candidate cand;
        cand.name = cr.at("name").str();
        check_name(cr.at("name"), cand.name);
        auto st = cr.at("stages");
        st.expect_array();
        if (st.size() == 0) st.fail("a candidate needs at least one stage");
        for (size_t s = 0; s < st.size(); ++s) {
          auto sr = st.at(s);
          sr.allow_only({"program", "kernel", "bind"});
          Stage stage;
          stage.program = sr.at("program").str();
          if (sr.has("kernel")) stage.kernel = int(sr.at("kernel").int64());
          if (sr.has("bind")) {
            auto br = sr.at("bind");
            br.expect_object();
            br.each_member([&](const std::string& k, const JsonReader& v) { stage.bind[k] = v.str(); });
          }
          cand.stages.push_back(std::move(stage));
        }
        if (cr.has("window")) cand.window = read_window(cr.at("window"));
        if (cr.has("deterministic")) cand.deterministic = cr.at("deterministic").boolean();
        if (cr.has("accumulate")) {
          std::string a = cr.at("accumulate").str();
          if (a == "off") cand.accumulate = Accumulate::off;
          else if (a == "fused") cand.accumulate = Accumulate::fused;
          else if (a == "composed") cand.accumulate = Accumulate::composed;
          else cr.at("accumulate").fail("accumulate is 'off', 'fused' or 'composed'");
        }
        if (cr.has("scratch")) {
          // One buffer as an object, or several as an array of them.
          auto sc = cr.at("scratch");
          auto read_buffer = [&](const JsonReader& b) {
            b.allow_only({"dims", "dtype_of", "times", "ceil_div"});
            ScratchBuffer buf;
            buf.dims = read_strings(b.at("dims"));
            buf.dtype_of = b.at("dtype_of").str();
            if (b.has("times")) {
              buf.times = b.at("times").int64();
              if (buf.times < 1) b.at("times").fail("must be >= 1");
            }
            if (b.has("ceil_div")) {
              auto cd = b.at("ceil_div");
              cd.expect_array();
              if (cd.size() != 2) cd.fail("ceil_div is [dim, rows]");
              buf.ceil_div_dim = cd.at(size_t{0}).str();
              buf.ceil_div_by = cd.at(size_t{1}).int64();
              if (buf.ceil_div_by < 1) cd.at(size_t{1}).fail("must be >= 1");
            }
            if (buf.dims.empty()) b.at("dims").fail("scratch needs at least one dim");
            cand.scratch.buffers.push_back(std::move(buf));
          };
          if (sc.value().is_array()) {
            if (sc.size() == 0) sc.fail("scratch needs at least one buffer");
            for (size_t i = 0; i < sc.size(); ++i) read_buffer(sc.at(i));
          } else {
            read_buffer(sc);
          }
        }
        if (cr.has("note")) cand.note = cr.at("note").str();
        cand.origin = {file_name, "/routes/" + std::to_string(i) + "/candidates/" + std::to_string(c)};
        route.candidates.push_back(std::move(cand));
      }
      // A later file's candidates for an existing op go on top: user registries override.
      auto existing = std::find_if(routes_.begin(), routes_.end(),
                                   [&](const Route& x) { return x.op == route.op; });
      if (existing == routes_.end()) {
        routes_.push_back(std::move(route));
      } else {
        route.candidates.insert(route.candidates.end(), existing->candidates.begin(),
                                existing->candidates.end());
        existing->candidates = std::move(route.candidates);
      }
    }
  }
}

void Registry::index() {
  program_index_.clear();
  build_index_.clear();
  route_index_.clear();
  for (size_t i = 0; i < programs_.size(); ++i) {
    const Program& p = programs_[i];
    auto [it, fresh] = program_index_.emplace(p.name, i);
    if (!fresh)
      throw RegistryError(p.origin.str(), "duplicate program name '" + p.name + "' (first defined at " +
                                              programs_[it->second].origin.str() + ")");
  }
  for (size_t i = 0; i < builds_.size(); ++i) {
    const Build& b = builds_[i];
    auto [it, fresh] = build_index_.emplace(b.key(), i);
    if (!fresh)
      throw RegistryError(b.origin.str(), "duplicate build " + b.key() + " (first at " +
                                              builds_[it->second].origin.str() + ")");
  }
  for (size_t i = 0; i < routes_.size(); ++i) route_index_.emplace(routes_[i].op, i);
}

void Registry::validate() const {
  // Names are unique (index()); in name order here, for the instance-name prefix check.
  std::map<std::string_view, const Program*> programs;
  for (const auto& p : programs_) {
    programs.emplace(p.name, &p);
    for (size_t i = 1; i < p.archs.size(); ++i)
      if (std::find(p.archs.begin(), p.archs.begin() + i, p.archs[i]) != p.archs.begin() + i)
        throw RegistryError(p.origin.str() + "/archs", "arch " + p.archs[i].str() + " listed twice");
  }

  for (const auto& p : programs_) check_instance_rules(p, programs);

  // A stand-in runs in its program's place with the program's launch: the same template and
  // params, as many kernels, every arch of the program, and no stand-in of its own.
  for (const auto& p : programs_) {
    if (p.stand_in.empty()) continue;
    const std::string where = p.origin.str() + "/stand_in";
    auto s = programs.find(p.stand_in);
    if (s == programs.end()) throw RegistryError(where, "unknown program '" + p.stand_in + "'");
    const Program& si = *s->second;
    if (si.name == p.name) throw RegistryError(where, "a program cannot stand in for itself");
    if (!si.stand_in.empty())
      throw RegistryError(where, "stand-in '" + si.name + "' has a stand-in of its own ('" + si.stand_in + "')");
    if (si.templ != p.templ || si.params != p.params || si.kernels.size() != p.kernels.size() ||
        si.instance_dims != p.instance_dims)
      throw RegistryError(where, "stand-in '" + si.name + "' must have the template, params, kernel count and "
                                 "instance dims of '" + p.name + "'");
    for (const auto& a : p.archs)
      if (std::find(si.archs.begin(), si.archs.end(), a) == si.archs.end())
        throw RegistryError(where, "stand-in '" + si.name + "' does not list arch " + a.str());
  }

  for (const auto& b : builds_) {
    auto p = programs.find(b.program);
    if (p == programs.end())
      throw RegistryError(b.origin.str() + "/program", "build for unknown program '" + b.program + "'");
    const auto& archs = p->second->archs;
    if (std::find(archs.begin(), archs.end(), b.arch) == archs.end())
      throw RegistryError(b.origin.str() + "/arch", "program '" + b.program +
                                                        "' does not list arch " + b.arch.str());
  }
  // Every build names a listed (program, arch) and none is given twice: as many builds as
  // (program, arch) pairs means each pair has one.
  size_t pairs = 0;
  for (const auto& p : programs_) pairs += p.archs.size();
  if (pairs != builds_.size())
    for (const auto& p : programs_)
      for (const auto& a : p.archs)
        if (!build_index_.count(p.name + "@" + a.str()))
          throw RegistryError(p.origin.str(), "missing build for program '" + p.name + "' on " +
                                                  a.str() + " (no build.json entry)");

  for (const auto& r : routes_) {
    std::set<std::string> names;
    for (const auto& c : r.candidates) {
      if (!names.insert(c.name).second)
        throw RegistryError(c.origin.str() + "/name",
                            "duplicate candidate name '" + c.name + "' in route " + r.op);
      bool uses_scratch = false;
      for (size_t s = 0; s < c.stages.size(); ++s) {
        const auto& st = c.stages[s];
        auto where = [&] { return c.origin.str() + "/stages/" + std::to_string(s); };
        auto p = programs.find(st.program);
        if (p == programs.end())
          throw RegistryError(where() + "/program", "unknown program '" + st.program + "'");
        if (st.kernel < 0 || st.kernel >= int(p->second->kernels.size()))
          throw RegistryError(where() + "/kernel", "kernel index " + std::to_string(st.kernel) +
                                                     " out of range for program " + st.program);
        for (const auto& [param, arg] : st.bind) {
          if (arg == "scratch") uses_scratch = true;
          if (arg.rfind("scratch.", 0) != 0) continue;
          const std::string i = arg.substr(8);
          if (i.empty() || i.size() > 3 || i.find_first_not_of("0123456789") != std::string::npos ||
              std::stoul(i) >= c.scratch.buffers.size())
            throw RegistryError(where() + "/bind/" + param, "'" + arg + "' names no buffer of the candidate's " +
                                                               std::to_string(c.scratch.buffers.size()) +
                                                               " scratch buffers");
        }
      }
      if (uses_scratch && c.scratch.empty())
        throw RegistryError(c.origin.str(), "a stage binds 'scratch' but the candidate has no scratch");
      if (c.accumulate == Accumulate::composed && c.scratch.empty())
        throw RegistryError(c.origin.str(), "a composed candidate needs a scratch buffer");
    }
  }
}

Registry::Registry()
    : instances_(std::make_unique<InstanceTable>()), derived_(std::make_unique<DerivedBuildTable>()) {}
Registry::~Registry() = default;

const Program* Registry::program(const std::string& name) const {
  auto it = program_index_.find(name);
  return it == program_index_.end() ? instances_->find_program(name) : &programs_[it->second];
}

const Build* Registry::build(const std::string& program, const Arch& arch) const {
  const std::string key = program + "@" + arch.str();
  if (auto it = build_index_.find(key); it != build_index_.end()) return &builds_[it->second];
  if (const Build* b = instances_->find_build(key)) return b;
  if (const Build* b = derived_->find(key)) return b;
  const Program* p = this->program(program);
  if (p == nullptr || std::find(p->archs.begin(), p->archs.end(), arch) != p->archs.end()) return nullptr;
  const Build* from = derivation_source(*this, *p, arch);
  return from ? derived_->get(*from, arch) : nullptr;
}

std::vector<const Build*> Registry::device_builds(const Program& p, const Arch& device) const {
  std::vector<const Build*> cubins, ptx;
  for (const auto& arch : p.archs)
    if (arch.runs_on(device))
      if (const Build* b = build(p.name, arch)) (arch.virt ? ptx : cubins).push_back(b);
  std::stable_sort(cubins.begin(), cubins.end(), [&](const Build* x, const Build* y) {
    bool xe = x->arch == device, ye = y->arch == device;
    if (xe != ye) return xe;
    return x->arch.minor > y->arch.minor;
  });
  std::stable_sort(ptx.begin(), ptx.end(), [](const Build* x, const Build* y) { return y->arch < x->arch; });
  if (cubins.empty())
    if (const Build* b = build(p.name, device.plain())) cubins.push_back(b);
  cubins.insert(cubins.end(), ptx.begin(), ptx.end());
  return cubins;
}

const Program* Registry::instance(const Program& p, const std::map<std::string, int64_t>& dims,
                                  std::string* why) const {
  return instances_->get(*this, p, dims, why);
}

std::vector<const Build*> Registry::concrete_builds() const {
  std::vector<const Build*> out;
  for (const auto& b : builds_)
    if (const Program* p = program(b.program); p && !p->parametric()) out.push_back(&b);
  for (const auto& p : programs_)
    for (const auto& values : p.prebuild)
      if (const Program* inst = instance(p, values))
        for (const auto& a : inst->archs)
          if (const Build* b = build(inst->name, a)) out.push_back(b);
  return out;
}

const Route* Registry::route(const std::string& op) const {
  auto it = route_index_.find(op);
  return it == route_index_.end() ? nullptr : &routes_[it->second];
}

}  // namespace cake
