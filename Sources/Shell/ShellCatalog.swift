import Edge
import FoundationEssentials

/// The built shell in memory: every file's representations as prebuilt responses, verified
/// against the manifest at load. Requests never touch the file system, so a path from a request
/// has nothing to traverse.
public struct ShellCatalog: Sendable {
  /// One representation (coding) of a file.
  /// Classes, so that answering a request retains one reference, not every field.
  final class Representation: Sendable {
    let coding: ContentCoding
    /// Strong entity-tag, quotes included, from the representation's own SHA-256.
    let etag: String
    let body: SharedBytes
    let ok: PrebuiltResponse
    let notModified: PrebuiltResponse

    init(
      coding: ContentCoding, etag: String, body: SharedBytes, ok: PrebuiltResponse,
      notModified: PrebuiltResponse
    ) {
      self.coding = coding
      self.etag = etag
      self.body = body
      self.ok = ok
      self.notModified = notModified
    }
  }

  /// One served path.
  final class File: Sendable {
    let path: String
    let cacheClass: CacheClass
    let contentType: String
    let codings: [ContentCoding]
    /// br, gzip, identity (no hashing per request).
    private let representations: [Representation?]
    let lastModified: Int
    var negotiable: Bool { codings.count > 1 }

    init(
      path: String, cacheClass: CacheClass, contentType: String, codings: [ContentCoding],
      representations: [ContentCoding: Representation], lastModified: Int
    ) {
      self.path = path
      self.cacheClass = cacheClass
      self.contentType = contentType
      self.codings = codings
      self.representations = [representations[.br], representations[.gzip], representations[.identity]]
      self.lastModified = lastModified
    }

    /// The representation in `coding`, if the file has one.
    func representation(_ coding: ContentCoding) -> Representation? {
      switch coding {
      case .br: representations[0]
      case .gzip: representations[1]
      case .identity: representations[2]
      }
    }
  }

  let files: [File]
  /// The manifest it was loaded from.
  public let manifest: ShellManifest

  /// Headers on every HTML response: no inline script or
  /// style, no framing, no referrer beyond the site, no camera, microphone or geolocation, an
  /// isolated window.
  public static let htmlSecurityHeaders: [(name: String, value: String)] = [
    (
      "Content-Security-Policy",
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        + "manifest-src 'self'; worker-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
        + "form-action 'self'; frame-ancestors 'none'"
    ),
    ("Referrer-Policy", "same-origin"),
    ("Permissions-Policy", "camera=(), microphone=(), geolocation=()"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
  ]

  /// Loads `directory`/shell-manifest.json and every file it names, checking sizes and SHA-256.
  /// `lastModified` (epoch seconds) is sent as Last-Modified: the build holds no timestamps.
  public static func load(directory: String, lastModified: Int) throws(ShellError) -> ShellCatalog {
    let manager = FileManager.default
    guard let json = manager.contents(atPath: directory + "/" + ShellManifest.fileName) else {
      throw ShellError(
        "no built shell in \(directory) (\(ShellManifest.fileName) is missing); build it with "
          + "`band-edge shell build --to \(directory)` (build/run does this)")
    }
    let manifest: ShellManifest
    do {
      manifest = try JSONDecoder().decode(ShellManifest.self, from: json)
    } catch {
      throw ShellError("\(directory)/\(ShellManifest.fileName) is not a valid shell manifest")
    }
    guard manifest.formatVersion == 1 else {
      throw ShellError(
        "\(directory)/\(ShellManifest.fileName) has format \(manifest.formatVersion); expected 1")
    }
    var files: [File] = []
    var loaded: [String: SharedBytes] = [:]
    func read(_ name: String, size: Int, sha256: String) throws(ShellError) -> SharedBytes {
      if let bytes = loaded[name] { return bytes }
      guard !name.contains(".."), let data = manager.contents(atPath: directory + "/" + name) else {
        throw ShellError("\(directory)/\(name) is listed in the manifest but missing")
      }
      let bytes = Array(data)
      guard bytes.count == size, Codecs.sha256Hex(bytes) == sha256 else {
        throw ShellError("\(directory)/\(name) does not match its SHA-256 in the manifest; rebuild the shell")
      }
      let shared = SharedBytes(bytes)
      loaded[name] = shared
      return shared
    }
    for entry in manifest.entries {
      guard let cacheClass = entry.routeCacheClass else {
        throw ShellError("\(entry.path) has unknown cache class \(entry.cacheClass)")
      }
      var sources: [(ContentCoding, String, SharedBytes)] = [
        (.identity, entry.sha256, try read(entry.file, size: entry.size, sha256: entry.sha256))
      ]
      for variant in entry.variants {
        sources.append(
          (variant.coding, variant.sha256, try read(variant.file, size: variant.size, sha256: variant.sha256))
        )
      }
      let negotiable = sources.count > 1
      var representations: [ContentCoding: Representation] = [:]
      for (coding, sha256, body) in sources {
        let etag = "\"\(sha256.prefix(32))\""
        var common: [(name: String, value: String)] = [("ETag", etag)]
        if negotiable { common.append(("Vary", "Accept-Encoding")) }
        var headers: [(name: String, value: String)] = [("Content-Type", entry.contentType)]
        if coding != .identity { headers.append(("Content-Encoding", coding.rawValue)) }
        headers += common
        headers.append(("Last-Modified", Civil.imfFixdate(lastModified)))
        if coding == .identity { headers.append(("Accept-Ranges", "bytes")) }
        headers.append(("X-Content-Type-Options", "nosniff"))
        if entry.contentType.hasPrefix("text/html") { headers += htmlSecurityHeaders }
        let ok = PrebuiltResponse(
          Response(status: .ok, headers: headers, body: .shared(body)), cacheClass: cacheClass)
        let notModified = PrebuiltResponse(
          Response(status: .notModified, headers: common), cacheClass: cacheClass)
        representations[coding] = Representation(
          coding: coding, etag: etag, body: body, ok: ok, notModified: notModified)
      }
      files.append(
        File(
          path: entry.path, cacheClass: cacheClass, contentType: entry.contentType,
          codings: sources.map(\.0).sorted(), representations: representations, lastModified: lastModified))
    }
    return ShellCatalog(files: files, manifest: manifest)
  }

  /// One GET route per served path (HEAD follows from GET), with the file's cache class, answered
  /// from the request's head alone (no `Request` is built for it, over HTTP/1 or HTTP/2).
  public var routes: [Route] {
    files.map { file in
      Route.head(.get, file.path, cacheClass: file.cacheClass, name: "shell") { fields in
        Self.respond(to: fields, with: file)
      }
    }
  }

  /// Negotiation, then preconditions, then a range on the identity representation. Each field is
  /// read whole (repeated fields joined): a repeated `If-Modified-Since`, `Range` or `If-Range` is
  /// then no valid value and is ignored, as RFC 9110 §13.1.3 and §14.2 allow.
  static func respond(to head: some HeadFields, with file: File) -> HeadAnswer {
    let acceptEncoding = head.value("accept-encoding")
    let choice =
      file.negotiable ? selectEncoding(acceptEncoding, available: file.codings) : .coding(.identity)
    guard case .coding(let coding) = choice, let representation = file.representation(coding) else {
      return .made(
        .text(
          .notAcceptable, "No acceptable content coding; identity is refused by this request.\n",
          headers: [("Vary", "Accept-Encoding")]))
    }
    let ifNoneMatch = head.value("if-none-match")
    let ifModifiedSince = head.value("if-modified-since")
    if ifNoneMatch != nil || ifModifiedSince != nil,
      evaluatePreconditions(
        ifNoneMatch: ifNoneMatch, ifModifiedSince: ifModifiedSince, etag: representation.etag,
        lastModified: file.lastModified) == .notModified
    {
      return .prebuilt(representation.notModified)
    }
    if coding == .identity, let range = head.value("range") {
      let size = representation.body.count
      switch parseRange(
        range, ifRange: head.value("if-range"), size: size, etag: representation.etag,
        lastModified: file.lastModified)
      {
      case .whole:
        break
      case .partial(let bytes):
        var headers: [(name: String, value: String)] = [
          ("Content-Type", file.contentType),
          ("Content-Range", "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(size)"),
          ("ETag", representation.etag), ("X-Content-Type-Options", "nosniff"),
        ]
        if file.negotiable { headers.append(("Vary", "Accept-Encoding")) }
        return .made(
          Response(
            status: .partialContent, headers: headers, body: .bytes(Array(representation.body.buffer[bytes])))
        )
      case .unsatisfiable:
        var headers: [(name: String, value: String)] = [("Content-Range", "bytes */\(size)")]
        if file.negotiable { headers.append(("Vary", "Accept-Encoding")) }
        return .made(
          .text(.rangeNotSatisfiable, "The requested range is outside the file.\n", headers: headers))
      }
    }
    return .prebuilt(representation.ok)
  }

}
