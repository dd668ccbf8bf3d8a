//===- Files.h - reading and writing files without losing them -*- C++ -*-===//
//
// Every file the runtime writes is written whole or not at all: outputs go
// to a temporary name in the same directory, are flushed to disk (fsync)
// and renamed over the final name, and the directory is flushed too, so a
// process killed mid-write leaves the previous file intact (and a stray
// temporary), never a truncated file under the final name. Streams
// (metrics) are written to FILE.partial and renamed when they end.
//
// A temporary is locked (flock) by its writer from before anyone can see
// it under its name until it is renamed; the lock ends with the process.
// Before each atomic write, the temporaries of that file that earlier
// writers left when killed (their locks free) are removed; a live writer's,
// locked, is never touched.
//
// LOOMRT_FAULT_WRITE_LIMIT=N kills the process (SIGKILL) once N bytes of an
// atomic write have gone out: the tests' fault hook for a crash mid-export;
// LOOMRT_FAULT_WRITE_STOP=N stops it there (SIGSTOP), a live writer.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_COMMON_FILES_H
#define LOOMRT_COMMON_FILES_H

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace loomrt {

/// Fails (naming `what`, the option) unless `path` can be created or
/// replaced: its directory exists and is writable, and it is not a
/// directory. Checked before training, so a bad path costs no work.
void checkWritable(const std::string &path, const std::string &what);

/// The whole of a regular file; fails with its name otherwise (a missing
/// file, a directory, a read error).
std::string readWholeFile(const std::string &path);

/// Writes `path` atomically: `produce` is called with a function that
/// appends bytes, into a temporary file beside `path` that replaces it
/// only once complete and on disk.
void writeAtomically(
    const std::string &path,
    const std::function<void(const std::function<void(const void *, size_t)> &)>
        &produce);

/// Removes `path`.tmp.* files that no live writer holds: those that a
/// writer killed mid-write left behind.
void removeStaleTemporaries(const std::string &path);

/// A text stream written to `path`.partial and renamed to `path` by
/// `finish` (not renamed when the process dies first).
class PartialFile {
public:
  explicit PartialFile(const std::string &path);
  ~PartialFile();
  std::FILE *get() const { return file; }
  /// Closes, flushes to disk and renames to the final name.
  void finish();

private:
  std::string path;
  std::FILE *file = nullptr;
};

} // namespace loomrt

#endif // LOOMRT_COMMON_FILES_H
