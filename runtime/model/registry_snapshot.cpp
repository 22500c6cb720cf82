#include "registry_snapshot.hpp"

#include <type_traits>

#include "error.hpp"

namespace cake {
namespace {

constexpr std::string_view kMagic = "cake registry snapshot\n";
constexpr uint64_t kVersion = 2;

template <class>
constexpr bool kNoFields = false;

// Every field of every item, in one order for both directions (X is T or const T): a field
// left out here is left out of both, and the round-trip test's whole-item comparison finds it.
template <class Ar, class X>
void fields(Ar& ar, X& x) {
  using T = std::remove_const_t<X>;
  if constexpr (std::is_same_v<T, Range>) ar(x.lo, x.hi);
  else if constexpr (std::is_same_v<T, InstanceDim>) ar(x.dim, x.range, x.divisible);
  else if constexpr (std::is_same_v<T, Arch>) ar(x.major, x.minor, x.suffix, x.virt);
  else if constexpr (std::is_same_v<T, CudaVersion>) ar(x.major, x.minor);
  else if constexpr (std::is_same_v<T, ArchPattern>) ar(x.arch, x.or_newer);
  else if constexpr (std::is_same_v<T, Program>)
    ar(x.name, x.family, x.templ, x.kernels, x.archs, x.params, x.stand_in, x.instance_dims, x.prebuild,
       x.instance_values, x.origin);
  else if constexpr (std::is_same_v<T, Build>) ar(x.program, x.arch, x.min_cuda, x.options, x.source_hash, x.origin);
  else if constexpr (std::is_same_v<T, Window>)
    ar(x.archs, x.sm_count, x.dims, x.tiles, x.divisible, x.parity, x.dtypes, x.align);
  else if constexpr (std::is_same_v<T, TileWaves>) ar(x.per, x.waves);
  else if constexpr (std::is_same_v<T, Stage>) ar(x.program, x.kernel, x.bind);
  else if constexpr (std::is_same_v<T, ScratchBuffer>) ar(x.dims, x.dtype_of, x.times, x.ceil_div_dim, x.ceil_div_by);
  else if constexpr (std::is_same_v<T, Scratch>) ar(x.buffers);
  else if constexpr (std::is_same_v<T, Candidate>)
    ar(x.name, x.stages, x.window, x.deterministic, x.accumulate, x.scratch, x.note, x.origin);
  else if constexpr (std::is_same_v<T, Route>) ar(x.op, x.family, x.candidates);
  else static_assert(kNoFields<T>, "no snapshot fields for this type");
}

template <class T>
constexpr bool kInteger = std::is_integral_v<T> || std::is_enum_v<T>;

class Writer {
 public:
  explicit Writer(const std::vector<std::string>& files) : files_(files) {}
  std::string out;

  template <class... T>
  void operator()(const T&... xs) {
    (one(xs), ...);
  }

 private:
  const std::vector<std::string>& files_;

  void num(uint64_t v) {
    while (v >= 0x80) {
      out.push_back(char(uint8_t(v) | 0x80));
      v >>= 7;
    }
    out.push_back(char(v));
  }
  template <class T>
  void one(const T& x) {
    if constexpr (std::is_same_v<T, bool>) {
      num(x ? 1 : 0);
    } else if constexpr (kInteger<T>) {
      const int64_t v = int64_t(x);
      num((uint64_t(v) << 1) ^ uint64_t(v >> 63));  // zigzag: small negatives stay short
    } else {
      fields(*this, x);
    }
  }
  void one(const std::string& s) {
    num(s.size());
    out.append(s);
  }
  void one(const ProgramParams& p) { one(p.text()); }
  void one(const Origin& o) {
    uint64_t file = 0;  // 0: none; i + 1: files_[i]
    if (o.file_name)
      for (size_t i = 0; i < files_.size() && file == 0; ++i)
        if (files_[i] == *o.file_name) file = i + 1;
    if (o.file_name && file == 0) throw Error("registry snapshot: an item's file '" + *o.file_name + "' is not listed");
    num(file);
    one(o.path);
  }
  template <class T>
  void one(const std::vector<T>& v) {
    num(v.size());
    for (const T& x : v) one(x);
  }
  template <class K, class V>
  void one(const std::map<K, V>& m) {
    num(m.size());
    for (const auto& [k, v] : m) one(k), one(v);
  }
};

class Reader {
 public:
  explicit Reader(std::string_view bytes)
      : p_(reinterpret_cast<const uint8_t*>(bytes.data())), begin_(p_), end_(p_ + bytes.size()) {}

  template <class... T>
  void operator()(T&... xs) {
    (one(xs), ...);
  }
  uint64_t num() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) fail("ends inside a number");
      const uint8_t b = *p_++;
      if (shift == 63 && b > 1) fail("a number is longer than 64 bits");
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("a number is longer than 64 bits");
  }
  // A count of items, each at least one byte: never more than the bytes left.
  size_t count() {
    const uint64_t n = num();
    if (n > uint64_t(end_ - p_)) fail("a count exceeds the bytes left");
    return size_t(n);
  }
  std::string_view bytes(size_t n) {
    if (n > size_t(end_ - p_)) fail("a string runs past the end");
    std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  bool done() const { return p_ == end_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("registry snapshot: " + what + " (at byte " + std::to_string(p_ - begin_) + ")");
  }
  // The files the items' origins name (by index), shared by their items.
  void set_files(const std::vector<std::string>& files) {
    for (const auto& f : files) files_.push_back(std::make_shared<const std::string>(f));
  }

 private:
  const uint8_t* p_;
  const uint8_t* begin_;
  const uint8_t* end_;
  std::vector<std::shared_ptr<const std::string>> files_;

  template <class T>
  void one(T& x) {
    if constexpr (std::is_same_v<T, bool>) {
      const uint64_t v = num();
      if (v > 1) fail("a flag is not 0 or 1");
      x = v == 1;
    } else if constexpr (kInteger<T>) {
      const uint64_t u = num();
      const int64_t v = int64_t(u >> 1) ^ -int64_t(u & 1);
      x = T(v);
      if (int64_t(x) != v) fail("a value is out of its field's range");
    } else {
      fields(*this, x);
    }
  }
  void one(std::string& s) { s.assign(bytes(count())); }
  void one(ProgramParams& p) { p = ProgramParams::from_text(bytes(count())); }
  void one(Origin& o) {
    const uint64_t file = num();
    if (file > files_.size()) fail("an item names a file the snapshot does not list");
    o.file_name = file == 0 ? nullptr : files_[file - 1];
    one(o.path);
  }
  template <class T>
  void one(std::vector<T>& v) {
    const size_t n = count();
    v.clear();
    v.reserve(n);
    for (size_t i = 0; i < n; ++i) one(v.emplace_back());
  }
  template <class K, class V>
  void one(std::map<K, V>& m) {
    const size_t n = count();
    m.clear();
    for (size_t i = 0; i < n; ++i) {
      K k;
      one(k);
      V v;
      one(v);
      if (!m.empty() && !(m.rbegin()->first < k)) fail("map keys are not in increasing order");
      m.emplace_hint(m.end(), std::move(k), std::move(v));
    }
  }
};

}  // namespace

std::string RegistrySnapshot::write(const Registry& r) {
  Writer w(r.files_);
  w.out.append(kMagic);
  w(int64_t(kVersion), r.files_, r.programs_, r.builds_, r.routes_);
  return std::move(w.out);
}

void RegistrySnapshot::read(std::string_view bytes, Registry& r) {
  if (bytes.substr(0, kMagic.size()) != kMagic) throw Error("registry snapshot: not a snapshot (no magic line)");
  Reader in(bytes.substr(kMagic.size()));
  int64_t version = 0;
  in(version);
  if (version != int64_t(kVersion))
    in.fail("format version " + std::to_string(version) + ", this build reads " + std::to_string(kVersion));
  std::vector<std::string> files;
  in(files);
  in.set_files(files);
  std::vector<Program> programs;
  std::vector<Build> builds;
  std::vector<Route> routes;
  in(programs, builds, routes);
  if (!in.done()) in.fail("bytes after the last route");
  for (auto& f : files) r.files_.push_back(std::move(f));
  for (auto& p : programs) r.programs_.push_back(std::move(p));
  for (auto& b : builds) r.builds_.push_back(std::move(b));
  for (auto& x : routes) r.routes_.push_back(std::move(x));
}

}  // namespace cake
