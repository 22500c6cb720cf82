// The route registry: programs (what to compile), builds (per program and arch: min_cuda,
// NVRTC options, source hash) and routes (per op, ordered candidates of stages with the
// window each serves). Pure data; loaded from JSON, validated as a whole at load.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "arch.hpp"
#include "program_params.hpp"

namespace cake {

// The most int32 counters one program may ask its launches for (a registry bound, not a need).
constexpr int64_t kMaxCounterWords = 1024;
// The most workspace bytes per SM one program may ask its launches for (a registry bound).
constexpr int64_t kMaxWorkspacePerSm = int64_t(1) << 20;

struct Origin {
  std::shared_ptr<const std::string> file_name;  // one per registry file, shared by its items
  std::string path;                              // JSON pointer of the item
  // The registry file or "<embedded>/registry/x.json"; "" for an item made in code.
  const std::string& file() const {
    static const std::string none;
    return file_name ? *file_name : none;
  }
  std::string str() const { return file() + ": " + path; }
  friend bool operator==(const Origin& a, const Origin& b) { return a.file() == b.file() && a.path == b.path; }
};

struct Range {
  int64_t lo = 0;
  int64_t hi = std::numeric_limits<int64_t>::max();
  bool operator==(const Range&) const = default;
};

// A problem dim that a parametric program takes as a template parameter: "{h}" in its
// kernels' names becomes the call's value, which must lie in `range` and be a multiple of
// `divisible`.
struct InstanceDim {
  std::string dim;
  Range range;
  int64_t divisible = 1;
  bool operator==(const InstanceDim&) const = default;
};

class InstanceTable;
class DerivedBuildTable;

struct Program {
  std::string name;
  std::string family;
  std::string templ;                 // a header in templates/
  std::vector<std::string> kernels;  // C++ name expressions, one per kernel
  std::vector<Arch> archs;
  // The parameter set it was rendered from: launch geometry the ops read, and "counters"
  // (int32 words the Launch owns for the kernels, zero at every launch; checked at load).
  ProgramParams params;
  // A program that computes the same bits with the same launch contract (template, kernels'
  // parameters, params) and compiles faster: a first call that would have to compile this one
  // runs the stand-in while this one compiles in the background (runtime/loader.hpp).
  std::string stand_in;
  // A parametric program: the dims its kernels name; the planner asks the registry for the
  // instance a call's dims give (Registry::instance). `prebuild`: the instances `cakec build`
  // puts in aot/.
  std::vector<InstanceDim> instance_dims;
  std::vector<std::map<std::string, int64_t>> prebuild;
  // An instance: the parametric program it was made from and the values of its dims.
  const Program* instance_of = nullptr;
  std::map<std::string, int64_t> instance_values;
  Origin origin;
  bool parametric() const { return !instance_dims.empty(); }
  bool operator==(const Program&) const = default;
};

struct Build {
  std::string program;
  Arch arch;
  CudaVersion min_cuda;
  std::vector<std::string> options;  // NVRTC options, arch included
  std::string source_hash;           // sha256 of the rendered program and its headers
  Origin origin;
  std::string key() const { return program + "@" + arch.str(); }
  bool operator==(const Build&) const = default;
};

struct ArchPattern {
  Arch arch;
  bool or_newer = false;  // "sm_80+" : any arch of compute capability >= 8.0
  bool matches(const Arch& device) const;
  std::string str() const { return arch.str() + (or_newer ? "+" : ""); }
  bool operator==(const ArchPattern&) const = default;
};

// How many waves a call's output tiles make on the device: the tiles are the product over
// `per`'s dims of ceil(dim / size), and a wave is one tile per SM. A window that names it
// holds a call whose ceil(tiles / SMs) lies in `waves` (a tile that suits one wave of few,
// long tiles loses to a narrower one when there are many).
struct TileWaves {
  std::map<std::string, int64_t> per;  // dim -> tile size along it; empty: not asked
  Range waves;
  int64_t count(const std::map<std::string, int64_t>& dims, int sm_count) const;
  bool operator==(const TileWaves&) const = default;
};

struct Window {
  std::vector<ArchPattern> archs;  // empty: any arch
  Range sm_count;
  std::map<std::string, Range> dims;
  TileWaves tiles;
  std::map<std::string, int64_t> divisible;  // dim % k == 0
  std::map<std::string, int> parity;         // dim % 2 == value (0 even, 1 odd)
  std::map<std::string, DType> dtypes;       // argument -> dtype
  std::map<std::string, int> align;          // argument -> byte alignment of its pointer
  bool operator==(const Window&) const = default;
};

enum class Accumulate : uint8_t { off, fused, composed };
const char* accumulate_name(Accumulate a);

struct Stage {
  std::string program;
  int kernel = 0;                             // index into Program::kernels
  std::map<std::string, std::string> bind;    // kernel parameter -> call argument or "scratch"
  bool operator==(const Stage&) const = default;
};

// One buffer of a candidate's scratch: `times` x the product of these problem dims x the
// size of `dtype_of`'s dtype, x ceil(dim / ceil_div_by) when set (per-chunk partial sums: one
// row per chunk of rows).
struct ScratchBuffer {
  std::vector<std::string> dims;
  std::string dtype_of;
  int64_t times = 1;
  std::string ceil_div_dim;
  int64_t ceil_div_by = 0;
  bool operator==(const ScratchBuffer&) const = default;
};

// A candidate's scratch: its buffers one after another in one allocation, each at a multiple of
// kScratchAlign bytes. A stage binds the first as "scratch", the i-th (from 0) as "scratch.i".
struct Scratch {
  std::vector<ScratchBuffer> buffers;
  bool empty() const { return buffers.empty(); }
  bool operator==(const Scratch&) const = default;
};
inline constexpr int64_t kScratchAlign = 256;

struct Candidate {
  std::string name;
  std::vector<Stage> stages;
  Window window;
  bool deterministic = true;
  Accumulate accumulate = Accumulate::off;
  Scratch scratch;
  std::string note;  // why this candidate exists (shown by list-routes)
  Origin origin;
  bool operator==(const Candidate&) const = default;
};

struct Route {
  std::string op;
  std::string family;
  std::vector<Candidate> candidates;  // first matching window wins
  bool operator==(const Route&) const = default;
};

// One JSON document with its name, as read from disk or from the embedded copy.
struct RegistrySource {
  std::string file;
  std::string text;
};

class Registry {
 public:
  Registry();
  ~Registry();
  // The embedded default registry and build.json, then each CAKE_REGISTRY file on top.
  // The embedded part is read from the snapshot the build made of it (registry_snapshot.hpp).
  static std::shared_ptr<const Registry> load_default(
      const std::vector<std::string>& extra_files = {});
  // Parses and validates; throws RegistryError naming the file and JSON path.
  static std::shared_ptr<const Registry> from_sources(const std::vector<RegistrySource>& src);
  // A registry RegistrySnapshot::write made in this build (the embedded one, or a test's),
  // then `on_top`'s documents parsed onto it as from_sources would; the whole is validated
  // when there are any. The snapshot's items are not checked again: it is not an input
  // format (bytes that are not a whole snapshot are refused, nothing more).
  static std::shared_ptr<const Registry> from_snapshot(std::string_view snapshot,
                                                       const std::vector<RegistrySource>& on_top = {});
  // The registry's JSON documents as embedded (their names "<embedded>/x.json").
  static std::vector<RegistrySource> embedded_sources();

  // Declared programs and builds, then the instances made so far. A program that lists a
  // virtual arch also has a build for each plain arch from there on (derived_builds.hpp).
  const Program* program(const std::string& name) const;
  const Build* build(const std::string& program, const Arch& arch) const;
  // The builds that can serve a device of arch `device`, in the order to try: the program's
  // listed cubins that run there (its own arch first, then the closest older minor); when none
  // does, a cubin for the device's plain arch derived from a virtual arch; then its PTX builds.
  std::vector<const Build*> device_builds(const Program& p, const Arch& device) const;
  // The instance of parametric program `p` for a problem's dims: a concrete program (the
  // values in its kernels and params) with a build per arch of `p`, made on the first ask
  // and kept as long as the registry (thread-safe). Null, with `*why`, when a dim is
  // missing or outside p's domain.
  const Program* instance(const Program& p, const std::map<std::string, int64_t>& dims,
                          std::string* why = nullptr) const;
  // What can be compiled as it stands: every build of a program that is not parametric, and
  // the builds of each parametric program's `prebuild` instances (what `cakec build` builds).
  std::vector<const Build*> concrete_builds() const;

  const Route* route(const std::string& op) const;

  // As declared (parametric programs, not their instances).
  const std::vector<Program>& programs() const { return programs_; }
  const std::vector<Build>& builds() const { return builds_; }
  const std::vector<Route>& routes() const { return routes_; }
  const std::vector<std::string>& files() const { return files_; }

 private:
  friend class RegistrySnapshot;
  // One document; `text` outlives the call only (strings are copied out of it).
  void parse(const std::string& file, std::string_view text);
  void validate() const;
  void index();  // also refuses a program or build given twice

  std::vector<Program> programs_;
  std::vector<Build> builds_;
  std::vector<Route> routes_;
  std::vector<std::string> files_;
  std::unordered_map<std::string, size_t> program_index_, build_index_, route_index_;
  // Instances are a memo of pure functions of the declared data, so a const Registry fills it.
  std::unique_ptr<InstanceTable> instances_;
  std::unique_ptr<DerivedBuildTable> derived_;
};

}  // namespace cake
