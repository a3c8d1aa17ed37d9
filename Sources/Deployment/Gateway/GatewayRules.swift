import Edge
import FoundationEssentials

/// The rules of the gateway's settings that need no other section: pure functions from a value
/// to the reason it is refused (nil: accepted), phrased to follow the setting's path.
enum GatewayRules {
  /// `[a-z0-9][a-z0-9-]{0,62}`: an upstream's name, also an assertion audience.
  static func isUpstreamName(_ name: String) -> Bool {
    guard let first = name.utf8.first, name.utf8.count <= 63, isLowerAlphanumeric(first) else { return false }
    return name.utf8.allSatisfy { isLowerAlphanumeric($0) || $0 == UInt8(ascii: "-") }
  }

  /// `[a-z0-9_.]+` (at most 64 bytes): an audit event name.
  static func isAuditName(_ name: String) -> Bool {
    !name.isEmpty && name.utf8.count <= 64
      && name.utf8.allSatisfy {
        isLowerAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".")
      }
  }

  /// `type/subtype`, both RFC 9110 tokens in lower case, without parameters.
  static func isMediaType(_ text: String) -> Bool {
    let parts = text.split(separator: "/", omittingEmptySubsequences: false)
    return parts.count == 2
      && parts.allSatisfy { part in
        !part.isEmpty
          && part.utf8.allSatisfy { isLowerAlphanumeric($0) || "!#$%&'*+-.^_`|~".utf8.contains($0) }
      }
  }

  /// A DNS name in lower case: dot-separated labels of letters, digits and inner hyphens.
  static func isHostName(_ host: String) -> Bool {
    let labels = host.split(separator: ".", omittingEmptySubsequences: false)
    return host.utf8.count <= 253
      && labels.allSatisfy { label in
        guard let first = label.utf8.first, let last = label.utf8.last, label.utf8.count <= 63 else {
          return false
        }
        return isLowerAlphanumeric(first) && isLowerAlphanumeric(last)
          && label.utf8.allSatisfy { isLowerAlphanumeric($0) || $0 == UInt8(ascii: "-") }
      }
  }

  private static func isLowerAlphanumeric(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
      || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
  }

  /// Why the CA file at `path` cannot verify a core, or nil: it must be readable and hold a PEM
  /// certificate. Read at every load, so a reload sees a replaced file.
  static func caFileProblem(_ path: String) -> String? {
    guard let data = FileManager.default.contents(atPath: path) else { return "cannot be read" }
    guard String(decoding: data, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
      return "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
    }
    return nil
  }

  // MARK: the upstream's URL

  /// The core `text` names, or why it cannot be one. `http://` needs a port, and outside
  /// development a loopback IP literal (127.0.0.0/8 or [::1]; not the name `localhost`, which
  /// resolves through the system's resolver); `https://` defaults to port 443; neither may carry
  /// user info, a query, a fragment or a path other than `/`.
  static func target(_ text: String, development: Bool) -> Result<UpstreamSettings.Target, Refusal> {
    if text.hasPrefix("unix:") { return socketTarget(String(text.dropFirst(5))) }
    let pieces = text.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
    guard pieces.count == 2, pieces[0] == "http" || pieces[0] == "https" else {
      return .failure(Refusal("must be http://HOST:PORT, https://HOST[:PORT] or unix:/absolute/path"))
    }
    let https = pieces[0] == "https"
    let rest = pieces[1]
    if rest.contains("#") { return .failure(Refusal("must not hold a fragment (#)")) }
    if rest.contains("?") { return .failure(Refusal("must not hold a query (?)")) }
    let slash = rest.firstIndex(of: "/") ?? rest.endIndex
    let authority = rest[..<slash]
    guard rest[slash...].isEmpty || rest[slash...] == "/" else {
      return .failure(Refusal("must not hold a path: the core's paths are the client API's"))
    }
    if authority.contains("@") { return .failure(Refusal("must not hold user info (user@)")) }
    switch hostAndPort(String(authority), defaultPort: https ? 443 : nil) {
    case .failure(let refusal): return .failure(refusal)
    case .success(let (host, port)):
      if https { return .success(.https(host: host, port: port)) }
      let loopback = SocketAddress(authority.lowercased())?.isLoopback == true
      guard loopback || development else {
        return .failure(
          Refusal("must be https:// or unix: outside development: plain http:// only to 127.0.0.0/8 or [::1]")
        )
      }
      return .success(.http(host: host, port: port))
    }
  }

  /// `text` with any user info before the host (`user:password@`) shown as `***@`, so that a
  /// refused URL can be quoted in a problem line without its secret.
  static func masked(_ text: String) -> String {
    guard let scheme = text.firstRange(of: "://") else { return text }
    let rest = text[scheme.upperBound...]
    let authority = rest[..<(rest.firstIndex(of: "/") ?? rest.endIndex)]
    guard let at = authority.lastIndex(of: "@") else { return text }
    return String(text[..<scheme.upperBound]) + "***" + String(text[at...])
  }

  /// `HOST[:PORT]`: a lower-cased DNS name, IPv4 literal or bracketed IPv6 literal, and the port
  /// (required when `defaultPort` is nil).
  private static func hostAndPort(_ authority: String, defaultPort: Int?) -> Result<(String, Int), Refusal> {
    let lowered = authority.lowercased()
    var host = lowered
    var portText: Substring? = nil
    if lowered.hasPrefix("[") {
      guard let close = lowered.firstIndex(of: "]") else { return .failure(Refusal("has an unclosed [")) }
      host = String(lowered[lowered.index(after: lowered.startIndex)..<close])
      let after = lowered[lowered.index(after: close)...]
      guard after.isEmpty || after.hasPrefix(":") else { return .failure(Refusal("has text after ]")) }
      if !after.isEmpty { portText = after.dropFirst() }
      guard SocketAddress("[\(host)]:1") != nil else {
        return .failure(Refusal("has an invalid IPv6 address"))
      }
    } else {
      if let colon = lowered.lastIndex(of: ":") {
        host = String(lowered[..<colon])
        portText = lowered[lowered.index(after: colon)...]
      }
      guard isHostName(host) else { return .failure(Refusal("has an invalid host '\(host)'")) }
    }
    guard let portText else {
      guard let defaultPort else { return .failure(Refusal("needs a port: http://HOST:PORT")) }
      return .success((host, defaultPort))
    }
    guard portText.allSatisfy({ $0.isASCII && $0.isNumber }), let port = Int(portText),
      (1...65535).contains(port)
    else {
      return .failure(Refusal("has an invalid port"))
    }
    return .success((host, port))
  }

  /// `unix:` then an absolute path, with no empty, `.` or `..` segment, that fits a socket address
  /// (at most 107 bytes). Whether the socket exists is not checked: the core may start later.
  private static func socketTarget(_ path: String) -> Result<UpstreamSettings.Target, Refusal> {
    let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
    guard path.hasPrefix("/"), !segments.isEmpty,
      segments.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }),
      !path.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F })
    else {
      return .failure(Refusal("must be unix: then an absolute path without //, . or .. segments"))
    }
    guard path.utf8.count <= 107 else {
      return .failure(Refusal("names a socket path longer than 107 bytes"))
    }
    return .success(.unix(path: path))
  }

  // MARK: the forwarded path

  /// Why `path` cannot be a forward route's pattern, or nil: it starts with `ForwardRoute.prefix`
  /// and goes on with at least one segment; each is a lower-case literal (`[a-z0-9._~-]+`, not `.`
  /// or `..`), a `:name` named once (`schoolId` is the prefix's), or a last `*`.
  static func pathProblem(_ path: String) -> String? {
    guard path.hasPrefix(ForwardRoute.prefix), path.count > ForwardRoute.prefix.count else {
      return "must start with \(ForwardRoute.prefix) and name at least one more segment"
    }
    let segments = path.dropFirst(ForwardRoute.prefix.count).split(
      separator: "/", omittingEmptySubsequences: false)
    var names: Set<Substring> = ["schoolId"]
    for (i, segment) in segments.enumerated() {
      if segment.isEmpty { return "must not end in / or hold //" }
      if segment == "*" {
        if i != segments.count - 1 { return "may hold * only as its last segment" }
      } else if segment.hasPrefix(":") {
        let name = segment.dropFirst()
        guard let first = name.first, first.isASCII, first.isLetter,
          name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) })
        else { return "has the parameter '\(segment)': a parameter is : then letters and digits" }
        if !names.insert(name).inserted { return "names :\(name) twice" }
      } else if segment == "." || segment == ".."
        || !segment.utf8.allSatisfy({ isLowerAlphanumeric($0) || "._~-".utf8.contains($0) })
      {
        return "has the segment '\(segment)': a literal segment is lower-case letters, digits and . _ ~ - "
          + "(not . or ..), a parameter :name, or a last *"
      }
    }
    return nil
  }
}

/// Why a gateway value is refused, to follow its path and value in a problem line.
struct Refusal: Error, Equatable {
  let reason: String

  init(_ reason: String) { self.reason = reason }
}
