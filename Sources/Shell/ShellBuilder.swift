import FoundationEssentials

/// Why a shell build or load failed; the message names the file.
public struct ShellError: Error, CustomStringConvertible, Sendable {
  public let description: String
  /// An error with `description` as its message.
  public init(_ description: String) { self.description = description }
}

/// `band-edge shell build`: fingerprints, rewrites references, precompresses, writes the manifest.
///
/// Deterministic: the same `Public/` gives byte-identical output (sorted walk, no timestamps,
/// gzip with mtime 0, sorted JSON keys).
public enum ShellBuilder {
  /// Paths that keep their names (revalidated on every use).
  public static let entryPoints: Set<String> = [
    "index.html", "offline.html", "sw.js", "manifest.webmanifest",
  ]
  /// Marker in sw.js replaced with the JSON precache list.
  static let precacheMarker = "/* band-edge:precache */ []"
  /// Marker in sw.js replaced with the cache version (a hash of everything precached).
  static let versionMarker = "/* band-edge:version */ \"\""

  /// Builds `source` into `destination` (emptied first when it holds an earlier build).
  @discardableResult
  public static func build(from source: String, to destination: String) throws(ShellError) -> ShellManifest {
    let files = try readTree(source)
    guard files["index.html"] != nil, files["sw.js"] != nil, files["offline.html"] != nil else {
      throw ShellError("\(source) must hold index.html, offline.html and sw.js")
    }
    // Fingerprint leaves first, then stylesheets, then scripts, so that each file's own
    // references are rewritten before its hash is taken.
    var renamed: [String: String] = [:]  // "/icons/a.png" -> "/icons/a.3f9c2a1b.png"
    var output: [String: [UInt8]] = [:]  // relative output file -> bytes
    var sourceOf: [String: String] = [:]
    let fingerprinted = files.keys.filter { !entryPoints.contains($0) }.sorted {
      (rank($0), $0) < (rank($1), $1)
    }
    for path in fingerprinted {
      let bytes = rewrite(files[path]!, path: path, renamed: renamed)
      let name = fingerprintedName(path, hash: String(Codecs.sha256Hex(bytes).prefix(8)))
      renamed["/" + path] = "/" + name
      output[name] = bytes
      sourceOf[name] = path
    }
    for path in ["index.html", "offline.html", "manifest.webmanifest"] where files[path] != nil {
      output[path] = rewrite(files[path]!, path: path, renamed: renamed)
      sourceOf[path] = path
    }
    // The service worker precaches the public shell: the entry pages and every fingerprinted file.
    let precache =
      ["/", "/offline.html"] + (files["manifest.webmanifest"] != nil ? ["/manifest.webmanifest"] : [])
      + renamed.values.sorted()
    let versionInput = precache.map { url -> String in
      let file = url == "/" ? "index.html" : String(url.dropFirst())
      return url + " " + Codecs.sha256Hex(output[file] ?? [])
    }.joined(separator: "\n")
    let version = String(Codecs.sha256Hex(Array(versionInput.utf8)).prefix(16))
    var worker = String(decoding: rewrite(files["sw.js"]!, path: "sw.js", renamed: renamed), as: UTF8.self)
    guard worker.contains(precacheMarker), worker.contains(versionMarker) else {
      throw ShellError("\(source)/sw.js must contain \(precacheMarker) and \(versionMarker)")
    }
    let list = "[" + precache.map { "\"\($0)\"" }.joined(separator: ", ") + "]"
    worker = worker.replacing(precacheMarker, with: list).replacing(versionMarker, with: "\"\(version)\"")
    output["sw.js"] = Array(worker.utf8)
    sourceOf["sw.js"] = "sw.js"

    var entries: [ShellManifest.Entry] = []
    var written: [String: [UInt8]] = [:]
    for (file, bytes) in output.sorted(by: { $0.key < $1.key }) {
      var variants: [ShellManifest.Variant] = []
      if compressible(file) {
        for (coding, encoded) in [(ContentCoding.br, Codecs.brotli(bytes)), (.gzip, Codecs.gzip(bytes))] {
          guard let encoded, encoded.count < bytes.count else { continue }  // kept only when smaller
          let name = file + (coding == .br ? ".br" : ".gz")
          written[name] = encoded
          variants.append(
            .init(coding: coding, file: name, size: encoded.count, sha256: Codecs.sha256Hex(encoded)))
        }
      }
      written[file] = bytes
      let entry = ShellManifest.Entry(
        path: "/" + file, file: file, source: sourceOf[file] ?? file, contentType: contentType(file),
        cacheClass: entryPoints.contains(file) ? "revalidate" : "immutable", size: bytes.count,
        sha256: Codecs.sha256Hex(bytes), variants: variants)
      entries.append(entry)
      if file == "index.html" {
        var root = entry
        root.path = "/"
        entries.append(root)
      }
    }
    entries.sort { $0.path < $1.path }
    let manifest = ShellManifest(formatVersion: 1, entries: entries, precache: precache)
    try write(written, manifest: manifest, to: destination)
    return manifest
  }

  // MARK: steps

  private static func rank(_ path: String) -> Int {
    if path.hasSuffix(".css") { return 1 }
    if path.hasSuffix(".js") || path.hasSuffix(".mjs") { return 2 }
    return 0
  }

  static func fingerprintedName(_ path: String, hash: String) -> String {
    let slash = path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex
    guard let dot = path[slash...].firstIndex(of: ".") else { return path + "." + hash }
    return String(path[..<dot]) + "." + hash + String(path[dot...])
  }

  /// Replaces absolute references (`/styles.css`) with their fingerprinted names in text files.
  /// A reference must stand between delimiters (quotes, parentheses, whitespace, `=`, `,`) so that
  /// `/app.js` never rewrites part of `/app.json`.
  static func rewrite(_ bytes: [UInt8], path: String, renamed: [String: String]) -> [UInt8] {
    guard textual(path), !renamed.isEmpty else { return bytes }
    var out = bytes
    for (from, to) in renamed.sorted(by: { $0.key.count > $1.key.count }) {
      out = replaceDelimited(out, Array(from.utf8), Array(to.utf8))
    }
    return out
  }

  static func replaceDelimited(_ bytes: [UInt8], _ from: [UInt8], _ to: [UInt8]) -> [UInt8] {
    let before = Set("\"'(=, \t\n\r`".utf8)
    let after = Set("\"')?#, \t\n\r`".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var i = 0
    while i < bytes.count {
      if bytes[i] == from[0], i + from.count <= bytes.count, bytes[i..<(i + from.count)].elementsEqual(from),
        i == 0 || before.contains(bytes[i - 1]),
        i + from.count == bytes.count || after.contains(bytes[i + from.count])
      {
        out += to
        i += from.count
      } else {
        out.append(bytes[i])
        i += 1
      }
    }
    return out
  }

  static func textual(_ path: String) -> Bool {
    [".html", ".css", ".js", ".mjs", ".webmanifest", ".json", ".svg", ".txt"].contains { path.hasSuffix($0) }
  }

  static func compressible(_ path: String) -> Bool { textual(path) || path.hasSuffix(".ico") }

  /// The Content-Type of a served file, by its extension.
  public static func contentType(_ path: String) -> String {
    let types: [(String, String)] = [
      (".html", "text/html; charset=utf-8"), (".css", "text/css; charset=utf-8"),
      (".js", "text/javascript; charset=utf-8"), (".mjs", "text/javascript; charset=utf-8"),
      (".webmanifest", "application/manifest+json"), (".json", "application/json"),
      (".svg", "image/svg+xml"), (".png", "image/png"), (".ico", "image/x-icon"), (".woff2", "font/woff2"),
      (".txt", "text/plain; charset=utf-8"), (".webp", "image/webp"),
    ]
    return types.first { path.hasSuffix($0.0) }?.1 ?? "application/octet-stream"
  }

  // MARK: files

  private static func readTree(_ root: String) throws(ShellError) -> [String: [UInt8]] {
    let manager = FileManager.default
    guard let all = try? manager.subpathsOfDirectory(atPath: root) else {
      throw ShellError("\(root) is not a readable directory")
    }
    var files: [String: [UInt8]] = [:]
    for relative in all.sorted() {
      if relative.split(separator: "/").contains(where: { $0.hasPrefix(".") }) { continue }
      let full = root + "/" + relative
      if (try? manager.contentsOfDirectory(atPath: full)) != nil { continue }  // a directory
      guard let data = manager.contents(atPath: full) else { throw ShellError("cannot read \(full)") }
      files[relative] = Array(data)
    }
    return files
  }

  private static func write(_ files: [String: [UInt8]], manifest: ShellManifest, to destination: String)
    throws(ShellError)
  {
    let manager = FileManager.default
    if manager.fileExists(atPath: destination) {
      let existing = (try? manager.contentsOfDirectory(atPath: destination)) ?? []
      guard existing.isEmpty || existing.contains(ShellManifest.fileName) else {
        throw ShellError(
          "\(destination) is not empty and holds no earlier shell build; refusing to overwrite it")
      }
      for name in existing { try? manager.removeItem(atPath: destination + "/" + name) }
    }
    do {
      try manager.createDirectory(atPath: destination, withIntermediateDirectories: true)
      for (name, bytes) in files {
        let path = destination + "/" + name
        let directory = String(path[..<path.lastIndex(of: "/")!])
        try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
      }
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
      var json = try encoder.encode(manifest)
      json.append(contentsOf: Array("\n".utf8))
      try json.write(to: URL(fileURLWithPath: destination + "/" + ShellManifest.fileName))
    } catch {
      throw ShellError("cannot write \(destination): \(error)")
    }
  }
}
