// A registry in binary form. The build parses and checks the embedded registry with the code
// every registry goes through and writes the result as a snapshot compiled into the library
// (runtime/model/embedded/make_snapshot.cpp), so that a new process's Runtime builds its
// registry without a JSON parse or the checks: a third of the instructions the documents took
// (docs/decisions.md, "A new process's Runtime").
//
// Format: a magic line and a version, then the files, programs, builds and routes in the
// registry's order, every field of every item; integers as LEB128 varints (signed ones
// zigzagged), strings as a length and their bytes. A snapshot is read by the build that wrote
// it, so the format carries no compatibility: a new field is written and read here, and the
// round-trip test (every item compared whole) fails until it is.
#pragma once
#include <string>
#include <string_view>

#include "registry.hpp"

namespace cake {

class RegistrySnapshot {
 public:
  static std::string write(const Registry& r);
  // Appends the snapshot's files and items to `r` (not indexed: Registry::from_snapshot does
  // that). Throws Error for bytes that are not a whole snapshot of this format.
  static void read(std::string_view bytes, Registry& r);
};

}  // namespace cake
