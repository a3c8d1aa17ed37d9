import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Temporary directories for tests, all inside one per-process directory that is removed when
/// the test process exits (pass or fail); one left by a run that was killed is removed by the next.
package enum TestDirectory {
  /// The test process's own directory, made on first use.
  package static let root: URL = {
    let fm = FileManager.default
    let top = fm.temporaryDirectory
    // Directories of earlier runs whose process is gone (a killed run cannot remove its own).
    for name in (try? fm.contentsOfDirectory(atPath: top.path)) ?? [] where name.hasPrefix("band-edge-tests-")
    {
      if let pid = Int32(name.dropFirst("band-edge-tests-".count)), kill(pid, 0) != 0, errno == ESRCH {
        try? fm.removeItem(at: top.appendingPathComponent(name))
      }
    }
    let root = top.appendingPathComponent("band-edge-tests-\(getpid())")
    try? fm.createDirectory(at: root, withIntermediateDirectories: true)
    atexit { try? FileManager.default.removeItem(at: TestDirectory.root) }
    return root
  }()

  /// A new, empty directory named after `purpose`.
  package static func make(_ purpose: String) throws -> URL {
    let directory = root.appendingPathComponent("\(purpose)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
  }
}
