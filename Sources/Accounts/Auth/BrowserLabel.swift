/// A short name for a browser session ("Firefox on Windows") from its `User-Agent`, drawn only
/// from a fixed vocabulary: nothing of the header itself is ever shown or stored.
package enum BrowserLabel {
  /// Browsers in the order they must be tested (Edge and Opera also say Chrome; Chrome says Safari).
  package static let browsers: [(token: String, name: String)] = [
    ("Edg/", "Edge"), ("EdgiOS/", "Edge"), ("EdgA/", "Edge"), ("OPR/", "Opera"),
    ("SamsungBrowser/", "Samsung Internet"),
    ("Firefox/", "Firefox"), ("FxiOS/", "Firefox"), ("CriOS/", "Chrome"), ("Chrome/", "Chrome"),
    ("Safari/", "Safari"),
  ]
  /// Systems in the order they must be tested (iPad and Android also say Mac or Linux).
  static let systems: [(token: String, name: String)] = [
    ("iPhone", "iPhone"), ("iPad", "iPad"), ("Android", "Android"), ("CrOS", "ChromeOS"),
    ("Windows", "Windows"),
    ("Macintosh", "Mac"), ("Linux", "Linux"),
  ]

  /// "Chrome on Android", "Safari on Mac", "Firefox", "Browser on Linux"; nil without a header or
  /// when nothing in it is recognised.
  package static func summary(userAgent: String?) -> String? {
    guard let userAgent, userAgent.utf8.count <= 1024 else { return nil }
    let browser = browsers.first { userAgent.contains($0.token) }?.name
    let system = systems.first { userAgent.contains($0.token) }?.name
    switch (browser, system) {
    case (let b?, let s?): return "\(b) on \(s)"
    case (let b?, nil): return b
    case (nil, let s?): return "Browser on \(s)"
    case (nil, nil): return nil
    }
  }
}
