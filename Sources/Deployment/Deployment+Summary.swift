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
      """
  }
}
