import Edge

extension DeploymentLoader.Sections {
  /// `"upstreams"`: an object of API cores by name, each `{"url", ...}` (see `UpstreamSettings`).
  /// A core whose URL is refused is left out (its routes still find its name).
  mutating func upstreams() -> [String: UpstreamSettings] {
    let configured: [String: JSONValue]
    switch reader.members["upstreams"] {
    case nil, .null?: return [:]
    case .object(let members)?: configured = members
    default:
      reader.problems.append("'upstreams' must be an object of named API cores")
      return [:]
    }
    var upstreams: [String: UpstreamSettings] = [:]
    for (name, value) in configured.sorted(by: { $0.key < $1.key }) {
      if !GatewayRules.isUpstreamName(name) {
        problems.append(
          "upstream name '\(name)' must be 1 to 63 lower-case letters, digits and -, "
            + "starting with a letter or digit")
      }
      guard case .object(let settings) = value else {
        reader.problems.append("'upstreams.\(name)' must be an object")
        continue
      }
      if let upstream = upstream(name, settings, path: "upstreams.\(name)") { upstreams[name] = upstream }
    }
    return upstreams
  }

  /// One core: its URL, its TLS settings, its numbers (`GatewayLimits.upstream`) and the numbers'
  /// rules together; nil when the URL is missing or refused.
  private mutating func upstream(_ name: String, _ settings: [String: JSONValue], path: String)
    -> UpstreamSettings?
  {
    unknownKeys(settings, known: UpstreamSettings.keys, path: path)
    var target: UpstreamSettings.Target? = nil
    if let url = reader.string("url", in: settings, path: "\(path).url") {
      switch GatewayRules.target(url, development: environment == .development) {
      case .success(let found): target = found
      case .failure(let refusal):
        problems.append("\(path).url '\(GatewayRules.masked(url))' \(refusal.reason)")
      }
    } else if isAbsent(settings["url"]) {
      problems.append("\(path).url is missing: http://127.0.0.1:PORT, https://HOST[:PORT] or unix:/path")
    }
    var upstream = UpstreamSettings(name: name, target: target ?? .unix(path: "/"))
    tls(&upstream, settings, path: path, https: target.map { if case .https = $0 { true } else { false } })
    for limit in GatewayLimits.upstream { number(limit, in: settings, path: path, into: &upstream) }
    upstream.enabled = flag("enabled", in: settings, path: path) ?? true
    let seconds = { (d: Duration) in GatewayLimits.format(GatewayLimits.seconds(d)) }
    for (key, value) in [
      ("connectTimeout", upstream.timeouts.connect), ("firstByteTimeout", upstream.timeouts.firstByte),
    ]
    where value > upstream.timeouts.total {
      problems.append(
        "\(path).totalTimeout (\(seconds(upstream.timeouts.total)) s) must be at least \(key) (\(seconds(value)) s)"
      )
    }
    if upstream.pool.maxIdle > upstream.maxConnections {
      problems.append(
        "\(path).maxIdlePerLoop (\(upstream.pool.maxIdle)) must be at most maxConnections "
          + "(\(upstream.maxConnections))")
    }
    return target == nil ? nil : upstream
  }

  /// `"caFile"` (readable, holding a PEM certificate) and `"serverName"` (a DNS name), for https
  /// only (`https` nil: the URL was refused, so whether is not known).
  private mutating func tls(
    _ upstream: inout UpstreamSettings, _ settings: [String: JSONValue], path: String, https: Bool?
  ) {
    upstream.caFile = reader.string("caFile", in: settings, path: "\(path).caFile")
    upstream.serverName = reader.string("serverName", in: settings, path: "\(path).serverName")
    if https == false {
      for key in ["caFile", "serverName"] where !isAbsent(settings[key]) {
        problems.append("\(path).\(key) is for https:// upstreams only")
      }
    }
    if let file = upstream.caFile, let problem = GatewayRules.caFileProblem(file) {
      problems.append("\(path).caFile \(file) \(problem)")
    }
    if let name = upstream.serverName, !GatewayRules.isHostName(name) {
      problems.append("\(path).serverName '\(name)' must be a DNS name in lower case")
    }
  }

  /// `"forward"`: the routes in the file's order, each checked alone, then together and against
  /// `own`, the patterns band-edge answers itself (`ForwardRoute.conflicts`). A route whose path is
  /// missing or refused is left out.
  mutating func forwardRoutes(own: [String]) -> [ForwardRoute] {
    let items: [JSONValue]
    switch reader.members["forward"] {
    case nil, .null?: return []
    case .array(let array)?: items = array
    default:
      reader.problems.append("'forward' must be an array of routes")
      return []
    }
    let declared: Set<String> =
      if case .object(let upstreams)? = reader.members["upstreams"] { Set(upstreams.keys) } else { [] }
    var routes: [ForwardRoute] = []
    for (i, item) in items.enumerated() {
      guard case .object(let settings) = item else {
        reader.problems.append("'forward[\(i)]' must be an object")
        continue
      }
      if let route = forwardRoute(settings, path: "forward[\(i)]", upstreams: declared) {
        routes.append(route)
      }
    }
    problems += ForwardRoute.conflicts(routes, own: own)
    return routes
  }

  /// One route, its settings each checked (`upstreams`: the names `"upstreams"` declares).
  private mutating func forwardRoute(_ settings: [String: JSONValue], path: String, upstreams: Set<String>)
    -> ForwardRoute?
  {
    unknownKeys(settings, known: ForwardRoute.keys, path: path)
    let pattern = reader.string("path", in: settings, path: "\(path).path")
    let refused = pattern.flatMap(GatewayRules.pathProblem)
    if let pattern, let refused { problems.append("\(path).path '\(pattern)' \(refused)") }
    if isAbsent(settings["path"]) { problems.append("\(path).path is missing") }
    let upstream = reader.string("upstream", in: settings, path: "\(path).upstream")
    if let upstream, !upstreams.contains(upstream) {
      problems.append("\(path).upstream '\(upstream)' names no upstream in \"upstreams\"")
    }
    if isAbsent(settings["upstream"]) { problems.append("\(path).upstream is missing") }
    var route = ForwardRoute(
      path: pattern ?? "", methods: routeMethods(settings, path: path), upstream: upstream ?? "")
    route.since = reader.string("since", in: settings, path: "\(path).since")
    if let since = route.since, !DeploymentLoader.isVersion(since) {
      problems.append("\(path).since '\(since)' must be MAJOR.MINOR[.PATCH]")
    }
    routeBody(&route, settings, path: path)
    routeAudit(&route, settings, path: path)
    route.capability = reader.string("capability", in: settings, path: "\(path).capability")
    if let capability = route.capability, !Capabilities.forwarded.contains(capability) {
      let served = Capabilities.forwarded.sorted().joined(separator: ", ")
      problems.append("\(path).capability '\(capability)' must be one an API core serves: \(served)")
    }
    route.enabled = flag("enabled", in: settings, path: path) ?? true
    return pattern != nil && refused == nil ? route : nil
  }

  /// `"methods"`: GET, HEAD, POST, PUT, PATCH or DELETE to `read_only`, `teacher` or
  /// `administrator`; HEAD not beside GET, which implies it.
  private mutating func routeMethods(_ settings: [String: JSONValue], path: String) -> [HTTPMethod:
    SchoolRole]
  {
    let key = "\(path).methods"
    guard case .object(let configured)? = settings["methods"] else {
      if isAbsent(settings["methods"]) {
        problems.append("\(key) is missing: an object from method to least role")
      } else {
        reader.problems.append("'\(key)' must be an object")
      }
      return [:]
    }
    if configured.isEmpty { problems.append("\(key) names no method") }
    var methods: [HTTPMethod: SchoolRole] = [:]
    for (name, value) in configured.sorted(by: { $0.key < $1.key }) {
      let method = HTTPMethod(name)
      guard ForwardRoute.methodOrder.contains(method) else {
        problems.append("\(key) names '\(name)': a route forwards GET, HEAD, POST, PUT, PATCH or DELETE")
        continue
      }
      guard case .string(let text) = value, let role = SchoolRole(rawValue: text) else {
        problems.append("\(key).\(name) must be read_only, teacher or administrator")
        continue
      }
      methods[method] = role
    }
    if methods[.get] != nil && methods[.head] != nil {
      problems.append("\(key) names HEAD beside GET: GET implies HEAD, with GET's role; remove HEAD")
    }
    return methods
  }

  /// `"maxBodyBytes"` and `"mediaTypes"`, for a route that forwards a method with a body.
  private mutating func routeBody(_ route: inout ForwardRoute, _ settings: [String: JSONValue], path: String)
  {
    for limit in GatewayLimits.route { number(limit, in: settings, path: path, into: &route) }
    if let types = reader.strings("mediaTypes", in: settings, path: "\(path).mediaTypes") {
      route.mediaTypes = types
      if types.isEmpty { problems.append("\(path).mediaTypes names no media type") }
      for (type, count) in DeploymentLoader.counts(types) where count > 1 {
        problems.append("\(path).mediaTypes lists '\(type)' twice")
      }
      for type in types where !GatewayRules.isMediaType(type) {
        problems.append("\(path).mediaTypes '\(type)' must be type/subtype in lower case, without parameters")
      }
    }
    let takesBody = route.methods.keys.contains(where: ForwardRoute.bodyMethods.contains)
    guard !route.methods.isEmpty, !takesBody else { return }
    for key in ["maxBodyBytes", "mediaTypes"] where !isAbsent(settings[key]) {
      problems.append("\(path).\(key) is for routes that forward a body (POST, PUT, PATCH)")
    }
  }

  /// `"audit"`: the event a mutation records, needed exactly when a method mutates.
  private mutating func routeAudit(_ route: inout ForwardRoute, _ settings: [String: JSONValue], path: String)
  {
    route.audit = reader.string("audit", in: settings, path: "\(path).audit")
    if let audit = route.audit, !GatewayRules.isAuditName(audit) {
      problems.append("\(path).audit '\(audit)' must be 1 to 64 lower-case letters, digits, _ and .")
    }
    guard !route.methods.isEmpty else { return }
    let mutates = route.methods.keys.contains(where: ForwardRoute.mutatingMethods.contains)
    if mutates && isAbsent(settings["audit"]) {
      problems.append(
        "\(path).audit is missing: a route that forwards POST, PUT, PATCH or DELETE "
          + "names the audit event it records")
    } else if !mutates && !isAbsent(settings["audit"]) {
      problems.append("\(path).audit is for routes that forward POST, PUT, PATCH or DELETE")
    }
  }

  /// `Capabilities.forwarded`, each on exactly while some route naming it is forwarded
  /// (`Deployment.forwards`).
  func forwardedCapabilities(
    _ routes: [ForwardRoute], upstreams: [String: UpstreamSettings], killSwitches: [String]
  ) -> [String: Bool] {
    var values: [String: Bool] = [:]
    for name in Capabilities.forwarded {
      values[name] = routes.contains {
        $0.capability == name && Deployment.forwards($0, upstreams: upstreams, killSwitches: killSwitches)
      }
    }
    return values
  }

  // MARK: typed access inside a gateway object

  private func isAbsent(_ value: JSONValue?) -> Bool { value == nil || value == .null }

  private mutating func unknownKeys(_ settings: [String: JSONValue], known: Set<String>, path: String) {
    for key in settings.keys.sorted() where !known.contains(key) {
      reader.problems.append("unknown setting '\(path).\(key)'")
    }
  }

  private mutating func flag(_ key: String, in settings: [String: JSONValue], path: String) -> Bool? {
    switch settings[key] {
    case nil, .null?: return nil
    case .bool(let value)?: return value
    default:
      reader.problems.append("'\(path).\(key)' must be true or false")
      return nil
    }
  }

  /// Sets `limit` on `target` from `settings`, when there and in range.
  private mutating func number<Target>(
    _ limit: GatewayLimit<Target>, in settings: [String: JSONValue], path: String, into target: inout Target
  ) {
    switch settings[limit.key] {
    case nil, .null?: return
    case .number(let value)?:
      if let problem = limit.problem(value, path: "\(path).\(limit.key)") {
        problems.append(problem)
      } else {
        limit.write(&target, value)
      }
    default:
      reader.problems.append("'\(path).\(limit.key)' must be a number")
    }
  }
}
