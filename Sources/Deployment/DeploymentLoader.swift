import FoundationEssentials

/// Every problem found in a configuration, one plain line each.
public struct DeploymentProblems: Error, Sendable, Equatable {
  public let lines: [String]

  /// Problems, one line each.
  public init(lines: [String]) { self.lines = lines }
}

/// Loads the deployment from the environment (`BAND_LICENCE_ENV`, `BAND_LICENCE_APP_URL`) over an
/// optional JSON file, and validates it, failing closed with every problem at once.
public enum DeploymentLoader {
  static let knownKeys: Set<String> = [
    "environment", "origin", "label", "apple", "android", "verifiedLinkPaths", "capabilities",
    "killSwitches", "minimumAppVersion", "handoffLifetimeSeconds", "linkFileMaxAgeSeconds", "knownIdentities",
    "listen", "limits", "tls", "timezone", "database", "mail", "admin", "upstreams", "forward",
  ]

  /// Reads `configPath` (if any) and validates it together with `environment` variables.
  /// `ownRoutes`: the path patterns band-edge answers itself, which the composition knows; a
  /// forward route that can match one of their paths is a problem.
  public static func load(environment: [String: String], configPath: String?, ownRoutes: [String] = [])
    -> Result<Deployment, DeploymentProblems>
  {
    guard let configPath else {
      return load(environment: environment, configText: nil, name: "", ownRoutes: ownRoutes)
    }
    guard let data = FileManager.default.contents(atPath: configPath) else {
      return .failure(DeploymentProblems(lines: ["config file \(configPath) cannot be read"]))
    }
    return load(environment: environment, configText: Array(data), name: configPath, ownRoutes: ownRoutes)
  }

  /// Validates the file's bytes (nil: no file) with `environment` variables; `name` is for messages.
  static func load(
    environment: [String: String], configText: [UInt8]?, name: String, ownRoutes: [String] = []
  )
    -> Result<Deployment, DeploymentProblems>
  {
    var problems: [String] = []
    var file: [String: JSONValue] = [:]
    if let configText {
      do {
        guard case .object(let members) = try JSONValue.parse(configText) else {
          return .failure(DeploymentProblems(lines: ["config file \(name) must hold a JSON object"]))
        }
        file = members
      } catch .repeatedKey(let key) {
        return .failure(
          DeploymentProblems(lines: [
            "config file \(name) names the key '\(key)' twice in one object; keep one of them"
          ]))
      } catch {
        return .failure(DeploymentProblems(lines: ["config file \(name) is not valid JSON"]))
      }
    }
    var reader = Reader(members: file, problems: [])
    let deployment = validate(environment: environment, reader: &reader, ownRoutes: ownRoutes)
    problems += reader.problems
    for key in file.keys.sorted() where !knownKeys.contains(key) {
      problems.append("unknown setting '\(key)'")
    }
    guard problems.isEmpty, let deployment else { return .failure(DeploymentProblems(lines: problems)) }
    return .success(deployment)
  }

  /// Typed access to the file's members that records a problem for every wrong type.
  struct Reader {
    let members: [String: JSONValue]
    var problems: [String]

    mutating func string(_ key: String, in object: [String: JSONValue]? = nil, path: String? = nil) -> String?
    {
      switch (object ?? members)[key] {
      case nil, .null?: return nil
      case .string(let s)?: return s
      default:
        problems.append("'\(path ?? key)' must be a string")
        return nil
      }
    }

    mutating func strings(_ key: String, in object: [String: JSONValue]? = nil, path: String? = nil)
      -> [String]?
    {
      switch (object ?? members)[key] {
      case nil, .null?: return nil
      case .array(let items)?:
        var out: [String] = []
        for item in items {
          guard case .string(let s) = item else {
            problems.append("'\(path ?? key)' must be an array of strings")
            return nil
          }
          out.append(s)
        }
        return out
      default:
        problems.append("'\(path ?? key)' must be an array of strings")
        return nil
      }
    }

    mutating func object(
      _ key: String, known: Set<String>, in object: [String: JSONValue]? = nil, path: String? = nil
    )
      -> [String: JSONValue]?
    {
      switch (object ?? members)[key] {
      case nil, .null?: return nil
      case .object(let m)?:
        for k in m.keys.sorted() where !known.contains(k) {
          problems.append("unknown setting '\(path ?? key).\(k)'")
        }
        return m
      default:
        problems.append("'\(path ?? key)' must be an object")
        return nil
      }
    }

    mutating func integer(_ key: String) -> Int? {
      switch members[key] {
      case nil, .null?: return nil
      case .number(let n)? where n == n.rounded() && abs(n) < 1e9: return Int(n)
      default:
        problems.append("'\(key)' must be a whole number")
        return nil
      }
    }
  }

  /// The deployment the variables in `env` and the file in `r` describe, nil when `r.problems`
  /// holds at least one problem. One section of the file after the other (see `Sections`);
  /// `ownRoutes` as for `load`.
  static func validate(environment env: [String: String], reader r: inout Reader, ownRoutes: [String] = [])
    -> Deployment?
  {
    // Environment: the variable wins over the file; development by default.
    let environmentName =
      env["BAND_LICENCE_ENV"].flatMap { $0.isEmpty ? nil : $0 } ?? r.string("environment") ?? "development"
    guard let environment = Environment(rawValue: environmentName) else {
      r.problems.append("environment '\(environmentName)' must be development, staging or production")
      return nil
    }
    var s = Sections(reader: r, environment: environment)
    let origin = s.origin(variable: env["BAND_LICENCE_APP_URL"].flatMap { $0.isEmpty ? nil : $0 })
    let label = s.label()
    let appIDs = s.appleAppIDs()
    let (packageName, fingerprints) = s.android()
    s.knownIdentities(appIDs: appIDs, packageName: packageName)
    let paths = s.verifiedLinkPaths()
    let (configured, killSwitches) = s.capabilities()
    s.requireIdentities(configured, appIDs: appIDs, packageName: packageName)
    let (ios, androidVersion) = s.minimumVersions()
    let (handoff, maxAge) = s.lifetimes()
    let (listen, tls, admin) = s.listeners()
    let limits = s.limits()
    let mail = s.mail()
    let timezone = s.timezone()
    let upstreams = s.upstreams()
    let forwardRoutes = s.forwardRoutes(own: ownRoutes)
    let forwarded = s.forwardedCapabilities(forwardRoutes, upstreams: upstreams, killSwitches: killSwitches)
    let capabilities = configured.merging(forwarded) { $1 }

    r = s.reader
    r.problems += s.problems
    guard let origin, r.problems.isEmpty else { return nil }
    return Deployment(
      environment: environment, origin: origin, label: label, appleAppIDs: appIDs,
      androidPackageName: packageName, androidFingerprints: fingerprints, verifiedLinkPaths: paths,
      capabilities: Capabilities(values: capabilities), killSwitches: killSwitches, minimumIOSVersion: ios,
      minimumAndroidVersion: androidVersion, handoffLifetimeSeconds: handoff, linkFileMaxAge: maxAge,
      listen: listen,
      limits: limits, tls: tls, timezone: timezone, database: r.string("database"), mail: mail, admin: admin,
      upstreams: upstreams, forwardRoutes: forwardRoutes)
  }

  /// Why `name` cannot be the display time zone, or nil: an IANA name (`Area/City`, letters,
  /// digits, `_ + -`) whose TZif file is in /usr/share/zoneinfo, or one the pages know without
  /// it (`Europe/London`, `UTC`).
  static func checkTimezone(_ name: String) -> String? {
    let segments = name.split(separator: "/", omittingEmptySubsequences: false)
    let wellFormed =
      name.utf8.count <= 64
      && segments.allSatisfy { s in
        guard let first = s.first, first.isASCII, first.isLetter else { return false }
        return s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_+-".contains($0)) }
      }
    guard wellFormed else { return "timezone '\(name)' must be an IANA time zone name such as Europe/London" }
    if name == "Europe/London" || name == "UTC" { return nil }
    guard let data = FileManager.default.contents(atPath: "/usr/share/zoneinfo/" + name),
      data.starts(with: Array("TZif".utf8))
    else { return "timezone '\(name)' is not a time zone known to this machine (/usr/share/zoneinfo)" }
    return nil
  }

  // MARK: rules

  /// scheme://host[:port] with no path, query, fragment, user info or trailing slash.
  static func checkOrigin(_ text: String?, environment: Environment, problems: inout [String]) -> String? {
    guard let text, !text.isEmpty else {
      if environment == .development { return "http://127.0.0.1:8080" }
      problems.append("origin is missing: set BAND_LICENCE_APP_URL or \"origin\" to https://<your host>")
      return nil
    }
    let pieces = text.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
    guard pieces.count == 2 else {
      problems.append("origin '\(text)' must be scheme://host[:port]")
      return nil
    }
    let scheme = pieces[0].lowercased()
    let authority = pieces[1]
    guard !authority.isEmpty, !authority.contains(where: { "/?#@ ".contains($0) }) else {
      problems.append(
        "origin '\(text)' must be scheme://host[:port] with no path, query, user or trailing slash")
      return nil
    }
    var host = authority.lowercased()
    var port: Int? = nil
    if let colon = host.lastIndex(of: ":"), !host.hasSuffix("]") {
      guard let p = Int(host[host.index(after: colon)...]), (1...65535).contains(p) else {
        problems.append("origin '\(text)' has an invalid port")
        return nil
      }
      port = p
      host = String(host[..<colon])
    }
    guard scheme == "http" || scheme == "https" else {
      problems.append("origin '\(text)' must use http or https")
      return nil
    }
    if environment == .development {
      guard scheme == "http", host == "localhost" || host == "127.0.0.1", port != nil else {
        problems.append(
          "in development the origin must be http://localhost:<port> or http://127.0.0.1:<port>, not '\(text)'"
        )
        return nil
      }
    } else {
      var ok = true
      if scheme != "https" {
        problems.append("origin '\(text)' must use https in \(environment.rawValue)")
        ok = false
      }
      if let reason = placeholderHost(host) {
        problems.append(
          "origin host '\(host)' is a placeholder (\(reason)); set the real \(environment.rawValue) host")
        ok = false
      }
      guard ok else { return nil }
    }
    return scheme + "://" + host + (port.map { ":\($0)" } ?? "")
  }

  static func placeholderHost(_ host: String) -> String? {
    if ["example.com", "example.org", "example.net"].contains(where: {
      host == $0 || host.hasSuffix("." + $0)
    }) {
      return "a documentation domain"
    }
    if host == "example" || host.hasSuffix(".example") || host.hasSuffix(".invalid") || host == "invalid" {
      return "a reserved name"
    }
    if host == "localhost" || host.hasSuffix(".localhost") { return "localhost" }
    if host.hasPrefix("[")
      || (host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." })
    {
      return "an IP literal"
    }
    return nil
  }

  static func isAppID(_ id: String) -> Bool {
    let parts = id.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2, parts[0].count == 10, !parts[1].isEmpty else { return false }
    return parts[0].allSatisfy { ($0.isASCII && $0.isUppercase) || ($0.isASCII && $0.isNumber) }
      && parts[1].allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }
  }

  static func isPlaceholderAppID(_ id: String) -> Bool {
    let team = String(id.prefix(10))
    return Set(team).count == 1
      || ["ABCDE12345", "TEAMID1234", "0123456789", "1234567890", "ABCDEFGHIJ"].contains(team)
      || isPlaceholderName(id)
  }

  static func isPlaceholderName(_ name: String) -> Bool {
    let lower = name.lowercased()
    return ["example", "placeholder", "changeme", "yourcompany", "your-company", "todo"].contains {
      lower.contains($0)
    }
  }

  static func isPackageName(_ name: String) -> Bool {
    let segments = name.split(separator: ".", omittingEmptySubsequences: false)
    return segments.count >= 2
      && segments.allSatisfy { s in
        guard let first = s.first, first.isASCII, first.isLetter else { return false }
        return s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
      }
  }

  static func isFingerprint(_ fp: String) -> Bool {
    let bytes = fp.split(separator: ":", omittingEmptySubsequences: false)
    return bytes.count == 32
      && bytes.allSatisfy { b in
        b.count == 2 && b.allSatisfy { $0.isASCII && ($0.isNumber || ("A"..."F").contains($0)) }
      }
  }

  static func isVersion(_ v: String) -> Bool {
    let parts = v.split(separator: ".", omittingEmptySubsequences: false)
    return (2...3).contains(parts.count)
      && parts.allSatisfy { !$0.isEmpty && $0.count <= 6 && $0.allSatisfy(\.isNumber) }
  }

  static func counts(_ items: [String]) -> [(String, Int)] {
    var seen: [String: Int] = [:]
    var order: [String] = []
    for item in items {
      if seen[item] == nil { order.append(item) }
      seen[item, default: 0] += 1
    }
    return order.map { ($0, seen[$0]!) }
  }
}
