extension DeploymentLoader {
  /// One pass over the file, a section at a time, in the order `validate` calls them. What the
  /// reader finds (a value of the wrong type, an unknown key) goes to `reader.problems`; what the
  /// rules find goes to `problems`. `validate` reports the reader's first, then the rules', each in
  /// the order found.
  struct Sections {
    var reader: Reader
    var problems: [String] = []
    let environment: Environment

    /// Staging and production: placeholders are refused and app identities are needed.
    var strict: Bool { environment != .development }

    /// The origin: `BAND_LICENCE_APP_URL` (`variable`) wins over the file's `"origin"`, which is
    /// then not read at all.
    mutating func origin(variable: String?) -> String? {
      let text = variable ?? reader.string("origin")
      return checkOrigin(text, environment: environment, problems: &problems)
    }

    /// The label; staging must look visibly different from production (the shell also colours it
    /// by environment).
    mutating func label() -> String {
      let label = reader.string("label") ?? Deployment.defaultLabel(environment)
      if label.allSatisfy(\.isWhitespace) || label.count > 40 {
        problems.append("label must be 1 to 40 characters")
      }
      if environment == .staging && label.lowercased().contains("production") {
        problems.append("staging must not be labelled '\(label)': people must see it is not production")
      }
      return label
    }

    /// `"apple": {"appIDs": [...]}`: each `<TEAMID>.<bundle id>` once, none a placeholder when strict.
    mutating func appleAppIDs() -> [String] {
      let apple = reader.object("apple", known: ["appIDs"])
      let appIDs = reader.strings("appIDs", in: apple ?? [:], path: "apple.appIDs") ?? []
      for (id, count) in counts(appIDs) where count > 1 {
        problems.append("apple app ID '\(id)' is listed twice")
      }
      for id in appIDs {
        if !isAppID(id) {
          problems.append("apple app ID '\(id)' must be <10-character team ID>.<bundle ID>")
        } else if strict && isPlaceholderAppID(id) {
          problems.append("apple app ID '\(id)' is still a placeholder")
        }
      }
      return appIDs
    }

    /// `"android": {"packageName", "sha256CertFingerprints"}`: both or neither, each fingerprint
    /// once, nothing a placeholder when strict.
    mutating func android() -> (packageName: String?, fingerprints: [String]) {
      let android = reader.object("android", known: ["packageName", "sha256CertFingerprints"])
      let packageName = reader.string("packageName", in: android ?? [:], path: "android.packageName")
      let fingerprints =
        reader.strings(
          "sha256CertFingerprints", in: android ?? [:], path: "android.sha256CertFingerprints") ?? []
      if let packageName {
        if !isPackageName(packageName) {
          problems.append("android package name '\(packageName)' is not a valid application ID")
        } else if strict && isPlaceholderName(packageName) {
          problems.append("android package name '\(packageName)' is still a placeholder")
        }
      }
      if (packageName == nil) != fingerprints.isEmpty {
        problems.append("android needs both packageName and sha256CertFingerprints, or neither")
      }
      for (fp, count) in counts(fingerprints) where count > 1 {
        problems.append("android fingerprint '\(fp)' is listed twice")
      }
      for fp in fingerprints {
        if !isFingerprint(fp) {
          problems.append("android fingerprint '\(fp)' must be 32 upper-case hex bytes joined by colons")
        } else if strict && Set(fp.split(separator: ":")).count == 1 {
          problems.append("android fingerprint '\(fp)' is still a placeholder")
        }
      }
      return (packageName, fingerprints)
    }

    /// `"knownIdentities"`: staging and production must not share identities (checked when the
    /// other side is known).
    mutating func knownIdentities(appIDs: [String], packageName: String?) {
      guard let known = reader.object("knownIdentities", known: ["staging", "production"]) else { return }
      for other in [Environment.staging, .production] where other != environment {
        let path = "knownIdentities.\(other.rawValue)"
        guard
          let identities = reader.object(
            other.rawValue, known: ["appleBundleIDs", "androidPackageName"], in: known, path: path)
        else { continue }
        let bundles = Set(
          reader.strings("appleBundleIDs", in: identities, path: "\(path).appleBundleIDs") ?? [])
        for id in appIDs {
          let bundle = id.split(separator: ".", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
          if bundles.contains(bundle) {
            problems.append("\(environment.rawValue) uses \(other.rawValue)'s bundle ID '\(bundle)'")
          }
        }
        if let otherPackage = reader.string(
          "androidPackageName", in: identities, path: "\(path).androidPackageName"),
          otherPackage == packageName
        {
          problems.append("\(environment.rawValue) uses \(other.rawValue)'s package name '\(otherPackage)'")
        }
      }
    }

    /// `"verifiedLinkPaths"`: each once, each starting with `/`, with no space, `?` or `#`.
    mutating func verifiedLinkPaths() -> [String] {
      let paths = reader.strings("verifiedLinkPaths") ?? ["/native/callback", "/qr/*"]
      for (path, count) in counts(paths) where count > 1 {
        problems.append("verified link path '\(path)' is listed twice")
      }
      for path in paths
      where !path.hasPrefix("/") || path.contains(where: { $0 == " " || $0 == "?" || $0 == "#" }) {
        problems.append("verified link path '\(path)' must start with / and hold no spaces, ? or #")
      }
      return paths
    }

    /// `"capabilities"` over the defaults, then `"killSwitches"`, each naming a capability once,
    /// switch theirs off. The capabilities an API core serves (`Capabilities.forwarded`) follow
    /// the forward routes instead, and are refused here.
    mutating func capabilities() -> (values: [String: Bool], killSwitches: [String]) {
      var capabilities = Capabilities.defaults
      if let configured = reader.object("capabilities", known: Set(Capabilities.names)) {
        for (name, value) in configured.sorted(by: { $0.key < $1.key }) {
          if Capabilities.forwarded.contains(name) {
            problems.append(
              "capability '\(name)' follows the forward routes: it is on while an enabled route naming it goes to "
                + "an enabled upstream; remove it from \"capabilities\" (\"killSwitches\" still turns it off)"
            )
            continue
          }
          guard case .bool(let flag) = value else {
            if Capabilities.names.contains(name) {
              problems.append("capability '\(name)' must be true or false")
            }
            continue
          }
          capabilities[name] = flag
        }
      }
      let killSwitches = reader.strings("killSwitches") ?? []
      for (name, count) in counts(killSwitches) where count > 1 {
        problems.append("kill switch '\(name)' is listed twice")
      }
      for name in killSwitches {
        if capabilities[name] == nil {
          problems.append("kill switch '\(name)' names no capability")
        } else {
          capabilities[name] = false
        }
      }
      return (capabilities, killSwitches)
    }

    /// Identities are needed once verified links or native sign-in are on outside development.
    mutating func requireIdentities(_ capabilities: [String: Bool], appIDs: [String], packageName: String?) {
      guard strict && (capabilities["verifiedLinks"] == true || capabilities["nativeSignIn"] == true) else {
        return
      }
      if appIDs.isEmpty {
        problems.append(
          "no Apple app IDs: \(environment.rawValue) with verified links or native sign-in needs them")
      }
      if packageName == nil {
        problems.append(
          "no Android app: \(environment.rawValue) with verified links or native sign-in needs its package and fingerprints"
        )
      }
    }

    /// `"minimumAppVersion": {"ios", "android"}`, each MAJOR.MINOR[.PATCH] (default 1.0.0).
    mutating func minimumVersions() -> (ios: String, android: String) {
      let versions = reader.object("minimumAppVersion", known: ["ios", "android"])
      let ios = reader.string("ios", in: versions ?? [:], path: "minimumAppVersion.ios") ?? "1.0.0"
      let android =
        reader.string("android", in: versions ?? [:], path: "minimumAppVersion.android") ?? "1.0.0"
      for (platform, version) in [("ios", ios), ("android", android)] where !isVersion(version) {
        problems.append("minimumAppVersion.\(platform) '\(version)' must be MAJOR.MINOR[.PATCH]")
      }
      return (ios, android)
    }

    /// `"handoffLifetimeSeconds"` (120, the only value outside development) and
    /// `"linkFileMaxAgeSeconds"` (default an hour).
    mutating func lifetimes() -> (handoff: Int, linkFileMaxAge: Int) {
      let handoff = reader.integer("handoffLifetimeSeconds") ?? 120
      if strict && handoff != 120 {
        problems.append("handoffLifetimeSeconds must be 120 in \(environment.rawValue)")
      } else if !(1...120).contains(handoff) {
        problems.append("handoffLifetimeSeconds must be 1 to 120")
      }
      let maxAge = reader.integer("linkFileMaxAgeSeconds") ?? 3600
      if !(60...86400).contains(maxAge) { problems.append("linkFileMaxAgeSeconds must be 60 to 86400") }
      return (handoff, maxAge)
    }

    /// `"listen"`, `"tls"` and `"admin"`, as the file writes them (the executable checks the
    /// addresses and the networks).
    mutating func listeners() -> (listen: [String], tls: TLSSettings, admin: AdminSettings) {
      let listen = reader.strings("listen") ?? []
      var tls = TLSSettings()
      if let configured = reader.object("tls", known: ["listen", "certificate", "key"]) {
        tls.listen = reader.strings("listen", in: configured, path: "tls.listen") ?? []
        tls.certificate = reader.string("certificate", in: configured, path: "tls.certificate")
        tls.key = reader.string("key", in: configured, path: "tls.key")
      }
      var admin = AdminSettings()
      if let configured = reader.object("admin", known: ["listen", "allow"]) {
        admin.listen = reader.string("listen", in: configured, path: "admin.listen")
        admin.allow = reader.strings("allow", in: configured, path: "admin.allow") ?? []
      }
      return (listen, tls, admin)
    }

    /// `"limits"`: which names exist, their units and ranges are the executable's limit table's to
    /// say (one table feeds the flags and the file); here each value must be a number.
    mutating func limits() -> [String: Double] {
      var limits: [String: Double] = [:]
      if case .object(let configured)? = reader.members["limits"] {
        for (key, value) in configured.sorted(by: { $0.key < $1.key }) {
          guard case .number(let n) = value else {
            problems.append("limits.\(key) must be a number")
            continue
          }
          limits[key] = n
        }
      } else if let other = reader.members["limits"], other != .null {
        problems.append("'limits' must be an object")
      }
      return limits
    }

    /// `"mail"`: the relay an smtp:// or smtps:// URL, the sender an address.
    mutating func mail() -> MailSettings {
      var mail = MailSettings()
      guard let configured = reader.object("mail", known: ["smtp", "from", "username", "passwordFile"]) else {
        return mail
      }
      mail.smtp = reader.string("smtp", in: configured, path: "mail.smtp")
      mail.from = reader.string("from", in: configured, path: "mail.from")
      mail.username = reader.string("username", in: configured, path: "mail.username")
      mail.passwordFile = reader.string("passwordFile", in: configured, path: "mail.passwordFile")
      if let smtp = mail.smtp, !(smtp.hasPrefix("smtp://") || smtp.hasPrefix("smtps://")) {
        problems.append("mail.smtp must be an smtp:// or smtps:// URL")
      }
      // Bytes, not Characters: "\r\n" is one Character, equal to neither "\r" nor "\n".
      if let from = mail.from, !from.contains("@") || from.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
        problems.append("mail.from must be an email address (optionally 'Name <address>')")
      }
      return mail
    }

    /// `"timezone"` (default `Europe/London`), a zone this machine knows.
    mutating func timezone() -> String {
      let timezone = reader.string("timezone") ?? "Europe/London"
      if let problem = checkTimezone(timezone) { problems.append(problem) }
      return timezone
    }
  }
}
