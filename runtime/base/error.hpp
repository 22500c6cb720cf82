// One error family for the whole library. Every throw site names what went wrong in terms
// the caller can act on: the argument, the file and JSON path, the build, the driver call.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace cake {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A registry or build.json that cannot be used: `where` is "file: /json/path".
class RegistryError : public Error {
 public:
  RegistryError(std::string where, const std::string& what)
      : Error(where + ": " + what), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// A bad argument to a public call, raised before anything is launched or written.
class ArgumentError : public Error {
 public:
  ArgumentError(std::string argument, const std::string& what)
      : Error("argument '" + argument + "': " + what), argument_(std::move(argument)) {}
  const std::string& argument() const { return argument_; }

 private:
  std::string argument_;
};

// NVRTC refused or crashed on a program. Carries everything needed to reproduce it.
class CompileError : public Error {
 public:
  CompileError(const std::string& what, std::string program, std::string arch,
               std::string source_hash, std::vector<std::string> options, std::string log)
      : Error(what + " [program " + program + ", " + arch + ", source " +
              source_hash.substr(0, 16) + "]" + (log.empty() ? "" : "\n" + log)),
        program_(std::move(program)), arch_(std::move(arch)),
        source_hash_(std::move(source_hash)), options_(std::move(options)),
        log_(std::move(log)) {}
  const std::string& program() const { return program_; }
  const std::string& arch() const { return arch_; }
  const std::string& source_hash() const { return source_hash_; }
  const std::vector<std::string>& options() const { return options_; }
  const std::string& log() const { return log_; }

 private:
  std::string program_, arch_, source_hash_;
  std::vector<std::string> options_;
  std::string log_;
};

// A CUDA driver call failed: the call and the CUresult's name.
class DriverError : public Error {
 public:
  DriverError(std::string call, int code, std::string code_name)
      : Error("CUDA driver call " + call + " failed: " + code_name + " (" +
              std::to_string(code) + ")"),
        call_(std::move(call)), code_(code), code_name_(std::move(code_name)) {}
  const std::string& call() const { return call_; }
  int code() const { return code_; }
  const std::string& code_name() const { return code_name_; }

 private:
  std::string call_;
  int code_;
  std::string code_name_;
};

// A shared library the operation needs is not on this machine.
class LibraryMissing : public Error {
 public:
  using Error::Error;
};

}  // namespace cake
