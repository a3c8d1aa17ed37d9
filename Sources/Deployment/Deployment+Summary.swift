extension Deployment {
  /// What `band-edge config check` prints: the resolved deployment, one fact per line.
  public var summary: String {
    let on = Capabilities.names.filter { capabilities[$0] }
    let off = Capabilities.names.filter { !capabilities[$0] }
    return """
      environment:        \(environment.rawValue)
      origin:             \(origin)
      label:              \(label)
      apple app IDs:      \(appleAppIDs.isEmpty ? "(none)" : appleAppIDs.joined(separator: ", "))
      android package:    \(androidPackageName ?? "(none)")
      android signing:    \(androidFingerprints.isEmpty ? "(none)" : androidFingerprints.joined(separator: "\n                    "))
      verified links:     \(verifiedLinkPaths.joined(separator: ", "))
      capabilities on:    \(on.isEmpty ? "(none)" : on.joined(separator: ", "))
      capabilities off:   \(off.isEmpty ? "(none)" : off.joined(separator: ", "))
      kill switches:      \(killSwitches.isEmpty ? "(none)" : killSwitches.joined(separator: ", "))
      minimum versions:   iOS \(minimumIOSVersion), Android \(minimumAndroidVersion)
      handoff lifetime:   \(handoffLifetimeSeconds) s
      link file max-age:  \(linkFileMaxAge) s
      time zone:          \(timezone) (times on server-rendered pages)
      upstreams:          \(list(upstreamLines))
      forward routes:     \(list(forwardLines))
      """
  }

  /// One line per upstream, by name: name, URL (never a secret: user info is refused), state.
  public var upstreamLines: [String] {
    upstreams.keys.sorted().compactMap { upstreams[$0] }.map {
      "\($0.name) \($0.target) (\($0.enabled ? "enabled" : "disabled"))"
    }
  }

  /// One line per forward route, in the file's order: path, methods with their least role,
  /// upstream, and whether it is forwarded (and if not, why).
  public var forwardLines: [String] {
    forwardRoutes.map { route in
      let methods = ForwardRoute.methodOrder.compactMap { method in
        route.methods[method].map { "\(method.rawValue):\($0.rawValue)" }
      }
      let state =
        if !route.enabled {
          "disabled"
        } else if upstreams[route.upstream]?.enabled != true {
          "not forwarded: upstream disabled"
        } else if let capability = route.capability, killSwitches.contains(capability) {
          "not forwarded: kill switch \(capability)"
        } else {
          "enabled"
        }
      return "\(route.path) \(methods.joined(separator: " ")) -> \(route.upstream) (\(state))"
    }
  }

  /// `lines` under one another in the summary's value column, or `(none)`.
  private func list(_ lines: [String]) -> String {
    lines.isEmpty ? "(none)" : lines.joined(separator: "\n" + String(repeating: " ", count: 20))
  }
}
