#include "file_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "error.hpp"

namespace cake {

std::optional<std::string> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

void write_file_atomic(const std::filesystem::path& p, const std::string& data) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string tmp = p.string() + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rng());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error("cannot write " + tmp + ": " + std::strerror(err));
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw Error("cannot flush " + tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), p.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + p.string() + ": " + std::strerror(err));
  }
}

}  // namespace cake
