//===- Files.cpp - reading and writing files without losing them ----------===//

#include "Files.h"
#include "Internal.h"

#include <fcntl.h>
#include <signal.h>
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
/// (LOOMRT_FAULT_WRITE_LIMIT), or -1.
static int64_t faultLimit() {
  const char *v = std::getenv("LOOMRT_FAULT_WRITE_LIMIT");
  return v && *v ? std::strtoll(v, nullptr, 10) : -1;
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
  std::string temp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(temp.data());
  if (fd < 0)
    fail("cannot create a temporary file beside '" + path + "': " + why());
  int64_t limit = faultLimit(), written = 0;
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
        if (written >= limit)
          ::kill(::getpid(), SIGKILL);
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
    ::kill(::getpid(), SIGKILL);
  if (::fsync(fd) != 0)
    fails("error writing '" + path + "' to disk: " + why());
  // mkstemp makes the file private (0600); the result is an ordinary one.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  if (::close(fd) != 0) {
    ::unlink(temp.c_str());
    fail("error writing '" + path + "': " + why());
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    std::string message = why();
    ::unlink(temp.c_str());
    fail("cannot rename '" + temp + "' to '" + path + "': " + message);
  }
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
