import Shell

/// `band-edge shell build`: precompress Public/ into a served tree.
enum ShellCommand {
  static let defaultSource = "Public"
  static let defaultDestination = "shell-build"

  static let help = """
    Usage: band-edge shell build [--from DIR] [--to DIR]

    Builds the public shell: fingerprints every file but the entry points (/, /index.html,
    /offline.html, /sw.js, /manifest.webmanifest) and rewrites references to them, writes .br
    (quality 11) and .gz (level 9) siblings where smaller, generates the service worker's precache
    list, and writes shell-manifest.json with the size, content type, cache class and SHA-256 of
    every file and variant. The same input gives byte-identical output.

      --from DIR   the sources (default \(defaultSource))
      --to DIR     the served tree (default \(defaultDestination)); emptied first if it holds a build

    Exit status: 0 built; 1 the build failed (the line on stderr names the file); 2 usage error.
    """

  static func run(_ arguments: Arguments) throws(UsageError) -> Int32 {
    var arguments = arguments
    guard let verb = arguments.next() else { throw UsageError("shell needs a command: shell build") }
    if verb == "--help" || verb == "-h" {
      print(help)
      return 0
    }
    guard verb == "build" else {
      throw UsageError("unknown shell command '\(verb)'; see band-edge shell --help")
    }
    var source = defaultSource
    var destination = defaultDestination
    while let word = arguments.next() {
      switch word {
      case "--help", "-h":
        print(help)
        return 0
      case "--from": source = try arguments.value(of: word, inline: nil)
      case "--to": destination = try arguments.value(of: word, inline: nil)
      default: throw UsageError("shell build does not know '\(word)'; see band-edge shell --help")
      }
    }
    do {
      let manifest = try ShellBuilder.build(from: source, to: destination)
      let variants = manifest.entries.reduce(0) { $0 + $1.variants.count }
      print(
        "built \(manifest.entries.count) paths and \(variants) precompressed variants into \(destination)")
      return 0
    } catch {
      fail("shell build failed: \(error)")
      return 1
    }
  }
}
