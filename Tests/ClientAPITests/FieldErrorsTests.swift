import Deployment
import Edge
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI

@Suite("Refused fields and the network a session came from (pure)")
struct FieldErrorsTests {
  static let production: Deployment = {
    var deployment = try! DeploymentLoader.load(environment: [:], configPath: nil).get()
    deployment.environment = .production
    return deployment
  }()

  static let networks: [(String, String?)] = [
    ("192.0.2.7", "192.0.2"),
    ("192.0.2.255", "192.0.2"),
    ("198.51.100.1", "198.51.100"),
    ("2001:db8:1::5", "2001:db8:1"),
    ("2001:db8:1:2:3:4:5:6", "2001:db8:1"),
    ("2001:0db8:0001:ffff::", "2001:db8:1"),
    ("::ffff:192.0.2.7", "192.0.2"),  // IPv4-mapped counts as IPv4
    ("::1", "0:0:0"),
    ("::", "0:0:0"),
    ("1::2::3", nil),
    ("1:2:3:4:5:6:7:8:9", nil),
    ("256.1.1.1", nil),
    ("1.2.3", nil),
    ("fe80::1%eth0", nil),
    ("example.test", nil),
    ("", nil),
  ]

  @Test("an address's network: IPv4 /24, IPv6 /48", arguments: networks)
  func prefix(address: String, expected: String?) {
    #expect(NetworkPrefix.of(address) == expected)
  }

  @Test("a session's network is a keyed digest: the same for one /24, another for the next, no address in it")
  func hint() throws {
    let store = try SessionFixture(.sqlite).store
    let here = try #require(store.networkHint(address: "192.0.2.7"))
    #expect(store.networkHint(address: "192.0.2.200") == here)
    #expect(store.networkHint(address: "::ffff:192.0.2.9") == here)
    #expect(store.networkHint(address: "192.0.3.7") != here)
    // Sixteen hex digits: no dotted or colon form of an address can be in it (a random digest may
    // well contain the digits "192", so that is not what is checked).
    #expect(here.count == 16 && here.allSatisfy(\.isHexDigit))
    #expect(store.networkHint(address: "not an address") == nil)
    #expect(WebPages.whereLabel(session(network: here), here: here) == "Last used from this network")
    #expect(WebPages.whereLabel(session(network: here), here: nil) == "Last used from another network")
    #expect(WebPages.whereLabel(session(network: nil), here: here) == "Not recorded")
  }

  @Test(
    "a session's network is where it was last used: kept when it is marked seen (at most once a minute)",
    arguments: Engine.available)
  func lastUsed(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let account = try f.store.createAccount(
      email: "ada@example.test", displayName: "Ada", passwordHash: "x", actor: "test")
    let (home, school) = (
      f.store.networkHint(address: "192.0.2.7"), f.store.networkHint(address: "198.51.100.9")
    )
    _ = try f.store.createSession(
      accountID: account.id, kind: .web, platform: nil, appVersion: nil, token: "tok",
      lifetimes: SessionLifetimes(), network: home)
    let store = f.store
    func stored() throws -> String? {
      let sessions = try store.sessions(.accountID(account.id))
      return sessions.first?.network
    }
    _ = try f.store.session(token: "tok", lifetimes: SessionLifetimes(), network: school)
    #expect(try stored() == home, "not yet a minute: nothing written")
    f.clock.advance(ClientStore.seenResolution)
    _ = try f.store.session(token: "tok", lifetimes: SessionLifetimes(), network: school)
    #expect(try stored() == school)
    f.clock.advance(ClientStore.seenResolution)
    _ = try f.store.sessionViews(tokens: ["tok"], lifetimes: SessionLifetimes(), networks: [home])
    #expect(try stored() == home)
    f.clock.advance(ClientStore.seenResolution)
    _ = try f.store.session(token: "tok", lifetimes: SessionLifetimes(), network: nil)
    #expect(try stored() == home, "an unknown network keeps the last one")
  }

  func session(network: String?) -> SessionRecord {
    SessionRecord(
      id: "ses_1", accountID: "acc_1", kind: .web, platform: nil, appVersion: nil, createdAt: 0,
      lastSeenAt: 0,
      expiresAt: 1, revokedAt: nil, revokedReason: nil, browser: nil, network: network)
  }

  @Test("a refused field is marked, described by its message and its hint, and keeps its value")
  func refused() {
    let errors = FieldErrors("email", "Enter the email address.")
    let html = HTMLPage.field(
      "email", label: "Email", attributes: "type=\"text\"", value: "a<b", hint: "Your work address.",
      errors: errors)
    #expect(html.contains("aria-invalid=\"true\""))
    #expect(html.contains("aria-describedby=\"email-hint email-error\""))
    #expect(html.contains("<p class=\"field-error\" id=\"email-error\">"))
    #expect(html.contains("value=\"a&lt;b\""))
    let other = HTMLPage.field("name", label: "Name", attributes: "", errors: errors)
    #expect(!other.contains("aria-invalid") && !other.contains("aria-describedby"))
  }

  @Test("the summary links to each field, takes focus and puts \"Error: \" in the title")
  func summary() {
    var errors = FieldErrors()
    errors.add("name", "Enter your name.")
    errors.add("password", "Choose a longer password.")
    var page = HTMLPage(title: "Join")
    page.summary(errors)
    let document = page.document(deployment: Self.production, stylesheet: nil)
    #expect(document.contains("<title>Error: Join · Band Licence</title>"))
    #expect(document.contains("<a href=\"#name\">Enter your name.</a>"))
    #expect(document.contains("<a href=\"#password\">Choose a longer password.</a>"))
    #expect(document.contains("id=\"error-summary\" role=\"alert\" tabindex=\"-1\" autofocus"))
    var alerted = HTMLPage(title: "People")
    alerted.alert("A school needs at least one administrator.")
    let refused = alerted.document(deployment: Self.production, stylesheet: nil)
    #expect(refused.contains("<title>Error: People · Band Licence</title>") && refused.contains("autofocus"))
    var calm = HTMLPage(title: "Join")
    calm.summary(FieldErrors())
    #expect(!calm.document(deployment: Self.production, stylesheet: nil).contains("Error"))
  }
}
