//===- Files.cpp - reading and writing files without losing them ----------===//

#include "Files.h"
#include "Internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

using namespace loomrt;

static std::string directoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

static std::string why() { return std::strerror(errno); }

void loomrt::checkWritable(const std::string &path, const std::string &what) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    fail(what + " '" + path + "' is a directory; it names a file to write");
  std::string dir = directoryOf(path);
  if (::stat(dir.c_str(), &st) != 0)
    fail(what + " '" + path + "': its directory '" + dir +
         "' does not exist");
  if (!S_ISDIR(st.st_mode))
    fail(what + " '" + path + "': '" + dir + "' is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    fail(what + " '" + path + "': cannot write in '" + dir + "': " + why());
}

std::string loomrt::readWholeFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail("cannot open '" + path + "': " + why());
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("'" + path + "' is not a regular file");
  }
  std::string bytes(size_t(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ::close(fd);
      fail("cannot read '" + path + "': " +
           (n < 0 ? why() : std::string("it shrank while being read")));
    }
    done += size_t(n);
  }
  ::close(fd);
  return bytes;
}

/// Bytes an atomic write may write before the process is killed
/// (LOOMRT_FAULT_WRITE_LIMIT, SIGKILL) or stopped (LOOMRT_FAULT_WRITE_STOP,
/// SIGSTOP: a live writer, for the tests of the stale temporaries' removal),
/// or -1.
static int64_t faultLimit(int &signal) {
  signal = SIGKILL;
  if (const char *v = std::getenv("LOOMRT_FAULT_WRITE_LIMIT"); v && *v)
    return std::strtoll(v, nullptr, 10);
  signal = SIGSTOP;
  if (const char *v = std::getenv("LOOMRT_FAULT_WRITE_STOP"); v && *v)
    return std::strtoll(v, nullptr, 10);
  return -1;
}

static std::string baseNameOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

static bool sameFile(const struct stat &a, const struct stat &b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void loomrt::removeStaleTemporaries(const std::string &path) {
  std::string dir = directoryOf(path), prefix = baseNameOf(path) + ".tmp.";
  DIR *entries = ::opendir(dir.c_str());
  if (!entries)
    return;
  while (const struct dirent *entry = ::readdir(entries)) {
    std::string name = entry->d_name;
    if (name.rfind(prefix, 0) != 0)
      continue;
    std::string full = dir + "/" + name;
    int fd = ::open(full.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
      continue;
    // A live writer holds its temporary's lock; the lock goes with the
    // process, so one that can be taken proves the writer dead. The name
    // must still be that file (its writer may have renamed it meanwhile).
    struct stat held, named;
    if (::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        ::lstat(full.c_str(), &named) == 0 && sameFile(held, named))
      ::unlink(full.c_str());
    ::close(fd);
  }
  ::closedir(entries);
}

static void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  ::fsync(fd);
  ::close(fd);
}

void loomrt::writeAtomically(
    const std::string &path,
    const std::function<void(const std::function<void(const void *, size_t)> &)>
        &produce) {
  removeStaleTemporaries(path);
  // The temporary is locked for as long as this process writes it (see
  // removeStaleTemporaries). Between mkstemp and the lock another
  // process's removal may take the name: then it is made again.
  std::string temp;
  int fd = -1;
  for (;;) {
    temp = path + ".tmp.XXXXXX";
    fd = ::mkstemp(temp.data());
    if (fd < 0)
      fail("cannot create a temporary file beside '" + path + "': " + why());
    struct stat held, named;
    if (::flock(fd, LOCK_EX) == 0 && ::fstat(fd, &held) == 0 &&
        ::lstat(temp.c_str(), &named) == 0 && sameFile(held, named))
      break;
    ::close(fd);
  }
  int signal = SIGKILL;
  int64_t limit = faultLimit(signal), written = 0;
  auto fails = [&](const std::string &message) {
    ::close(fd);
    ::unlink(temp.c_str());
    fail(message);
  };
  auto append = [&](const void *data, size_t size) {
    const char *p = static_cast<const char *>(data);
    while (size) {
      size_t chunk = size;
      if (limit >= 0) {
        if (written >= limit) {
          ::kill(::getpid(), signal);
          limit = -1; // a stopped writer goes on when continued
          continue;
        }
        chunk = std::min<size_t>(chunk, size_t(limit - written));
      }
      ssize_t n = ::write(fd, p, chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        fails("error writing '" + path + "': " + why());
      p += n;
      size -= size_t(n);
      written += n;
    }
  };
  produce(append);
  if (limit >= 0 && written >= limit)
    ::kill(::getpid(), signal);
  if (::fsync(fd) != 0)
    fails("error writing '" + path + "' to disk: " + why());
  // mkstemp makes the file private (0600); the result is an ordinary one.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  // Renamed while still open, so still locked: the temporary is never
  // seen unlocked under its name while this process lives.
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    std::string message = why();
    ::unlink(temp.c_str());
    ::close(fd);
    fail("cannot rename '" + temp + "' to '" + path + "': " + message);
  }
  // The data is on disk (fsync above); a failing close loses nothing.
  ::close(fd);
  syncDirectory(directoryOf(path));
}

PartialFile::PartialFile(const std::string &path) : path(path) {
  file = std::fopen((path + ".partial").c_str(), "w");
  if (!file)
    fail("cannot write '" + path + ".partial': " + why());
}

PartialFile::~PartialFile() {
  if (file)
    std::fclose(file);
}

void PartialFile::finish() {
  if (!file)
    return;
  bool ok = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  ok = std::fclose(file) == 0 && ok;
  file = nullptr;
  std::string partial = path + ".partial";
  if (!ok)
    fail("error writing '" + partial + "': " + why());
  if (::rename(partial.c_str(), path.c_str()) != 0)
    fail("cannot rename '" + partial + "' to '" + path + "': " + why());
  syncDirectory(directoryOf(path));
}
