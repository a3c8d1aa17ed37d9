import Accounts

#if canImport(Glibc)
  import Glibc
#endif

extension KeyEncryptionKey {
  /// What to run to make a KEK file.
  static let howToMake = "(umask 077; openssl rand -hex 32 > FILE)"

  /// The KEK in the file at `path`; refuses a file that is not a regular file, is not owned by
  /// this process's user, can be read or written by group or others, or does not hold exactly 64
  /// hexadecimal digits (and at most one newline). The file is checked through the descriptor it
  /// is read from, so it cannot be swapped between the check and the read.
  public static func load(path: String) throws(GatewayError) -> KeyEncryptionKey {
    let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else {
      let code = errno
      throw GatewayError.keyFile(
        path: path,
        reason: code == ENOENT
          ? "does not exist; make one with \(howToMake)" : "cannot be opened: \(describe(code))")
    }
    defer { close(fd) }
    try checkOwnerAndMode(fd, path: path)
    var text: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 256)
    while text.count <= 130 {
      let n = read(fd, &buffer, buffer.count)
      if n < 0, errno == EINTR { continue }
      guard n >= 0 else {
        throw GatewayError.keyFile(path: path, reason: "cannot be read: \(describe(errno))")
      }
      if n == 0 { break }
      text += buffer[0..<n]
    }
    guard let key = parse(text) else {
      throw GatewayError.keyFile(
        path: path,
        reason: "must hold exactly 64 hexadecimal digits (32 random bytes); make one with \(howToMake)")
    }
    return key
  }

  /// The file behind `fd` is a regular file of this process's user with no permission for group
  /// or others.
  private static func checkOwnerAndMode(_ fd: Int32, path: String) throws(GatewayError) {
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      throw GatewayError.keyFile(path: path, reason: "cannot be examined: \(describe(errno))")
    }
    guard info.st_mode & S_IFMT == S_IFREG else {
      throw GatewayError.keyFile(path: path, reason: "is not a regular file")
    }
    guard info.st_uid == geteuid() else {
      throw GatewayError.keyFile(
        path: path,
        reason: "is owned by uid \(info.st_uid), not by the user band-edge runs as (uid \(geteuid()))")
    }
    guard info.st_mode & 0o077 == 0 else {
      throw GatewayError.keyFile(
        path: path,
        reason:
          "can be used by group or others (mode 0\(String(info.st_mode & 0o777, radix: 8))); chmod 600 it")
    }
  }

  /// The KEK in the file at `path`, made there first (32 fresh random bytes, mode 0600) when there
  /// is none — development's way to a KEK in its data directory. The file appears whole or not at
  /// all (written beside it, then linked into place), so two processes starting together agree on
  /// one key: the one that loses the race reads the winner's.
  public static func createIfAbsent(path: String) throws(GatewayError) -> KeyEncryptionKey {
    if access(path, F_OK) == 0 { return try load(path: path) }
    let key = try KeyEncryptionKey(bytes: Secrets.randomBytes(32))
    let temporary = path + ".new-" + Secrets.base64url(Secrets.randomBytes(6))
    defer { unlink(temporary) }
    try write(key.fileText, to: temporary, reportedAs: path)
    guard link(temporary, path) == 0 else {
      let code = errno
      if code == EEXIST { return try load(path: path) }
      throw GatewayError.keyFile(path: path, reason: "cannot be created: \(describe(code))")
    }
    syncDirectory(of: path)
    return key
  }

  /// Writes this key to a new file at `path` (mode 0600; an existing file is never replaced): the
  /// development KEK going with a copied store.
  public func save(to path: String) throws(GatewayError) {
    try Self.write(fileText, to: path, reportedAs: path)
    Self.syncDirectory(of: path)
  }

  /// Writes `bytes` to a new file at `path` (mode 0600, never following a link) and syncs it.
  private static func write(_ bytes: [UInt8], to path: String, reportedAs name: String) throws(GatewayError) {
    let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else {
      throw GatewayError.keyFile(path: name, reason: "cannot be created: \(describe(errno))")
    }
    defer { close(fd) }
    var written = 0
    while written < bytes.count {
      let n = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      if n < 0, errno == EINTR { continue }
      guard n > 0 else {
        throw GatewayError.keyFile(path: name, reason: "cannot be written: \(describe(errno))")
      }
      written += n
    }
    guard fchmod(fd, 0o600) == 0, fsync(fd) == 0 else {
      throw GatewayError.keyFile(path: name, reason: "cannot be written: \(describe(errno))")
    }
  }

  /// Makes a new directory entry in the directory of `path` durable (best effort).
  private static func syncDirectory(of path: String) {
    let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
    let fd = Glibc.open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { return }
    _ = fsync(fd)
    close(fd)
  }

  private static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
}
