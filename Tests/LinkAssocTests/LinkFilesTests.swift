import Testing

@testable import Deployment
@testable import LinkAssoc

// The same production configuration DeploymentTests validates, for the files it implies.
let fingerprint =
  "14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5"

/// A valid production configuration, with `changes` made.
func production(_ changes: [String: String] = [:]) -> String {
  var members: [String: String] = [
    "\"environment\"": "\"production\"",
    "\"origin\"": "\"https://app.bandlicence.test\"",
    "\"apple\"": "{\"appIDs\": [\"K7QW2X9P4M.test.bandlicence.app\"]}",
    "\"android\"":
      "{\"packageName\": \"test.bandlicence.app\", \"sha256CertFingerprints\": [\"\(fingerprint)\"]}",
  ]
  for (key, value) in changes { members["\"\(key)\""] = value }
  return "{" + members.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
    + "}"
}

func load(_ text: String) -> Result<Deployment, DeploymentProblems> {
  DeploymentLoader.load(environment: [:], configText: Array(text.utf8), name: "test.json")
}

@Suite("Link files")
struct LinkFileTests {
  @Test("exact bytes for a known configuration")
  func exactBytes() throws {
    let files = LinkFiles(try load(production()).get())
    #expect(
      String(decoding: files.apple, as: UTF8.self)
        == #"{"applinks":{"details":[{"appIDs":["K7QW2X9P4M.test.bandlicence.app"],"components":[{"/":"/native/callback","comment":"Band Licence verified link"},{"/":"/qr/*","comment":"Band Licence verified link"}]}]},"webcredentials":{"apps":["K7QW2X9P4M.test.bandlicence.app"]}}"#
    )
    #expect(
      String(decoding: files.android, as: UTF8.self)
        == #"[{"relation":["delegate_permission/common.get_login_creds","delegate_permission/common.handle_all_urls"],"target":{"namespace":"android_app","package_name":"test.bandlicence.app","sha256_cert_fingerprints":["\#(fingerprint)"]}}]"#
    )
  }

  @Test("verified links switched off: both files list nothing")
  func killSwitch() throws {
    let files = LinkFiles(try load(production(["killSwitches": "[\"verifiedLinks\"]"])).get())
    #expect(
      String(decoding: files.apple, as: UTF8.self)
        == #"{"applinks":{"details":[]},"webcredentials":{"apps":[]}}"#)
    #expect(String(decoding: files.android, as: UTF8.self) == "[]")
  }

  @Test("the same configuration gives the same bytes")
  func stable() throws {
    let a = LinkFiles(try load(production()).get())
    let b = LinkFiles(try load(production()).get())
    #expect(a.apple == b.apple && a.android == b.android && a.clientConfig == b.clientConfig)
  }

  @Test("/config has exactly the contract's fields")
  func clientConfig() throws {
    let files = LinkFiles(try load(production()).get())
    guard case .object(let members) = try JSONValue.parse(files.clientConfig) else {
      Issue.record("not an object")
      return
    }
    #expect(
      Set(members.keys) == [
        "contractVersion", "appName", "origin", "deployment", "paths", "handoff", "verifiedLinkPaths",
        "capabilities",
        "minimumAppVersion",
      ])
    #expect(members["contractVersion"] == .number(2))
    #expect(members["origin"] == .string("https://app.bandlicence.test"))
  }

  @Test(
    "/config reports attendance only while a forward route for it is forwarded",
    arguments: [
      ("true", "true", "[]", true), ("false", "true", "[]", false), ("true", "false", "[]", false),
      ("true", "true", #"["attendance"]"#, false),
    ])
  func forwardedCapability(route: String, upstream: String, killSwitches: String, on: Bool) throws {
    let text = production([
      "upstreams": #"{"core": {"url": "http://127.0.0.1:8081", "enabled": \#(upstream)}}"#,
      "forward":
        #"[{"path": "/api/client/v1/schools/:schoolId/attendance", "methods": {"GET": "read_only"}, "upstream": "core", "capability": "attendance", "enabled": \#(route)}]"#,
      "killSwitches": killSwitches,
    ])
    let files = LinkFiles(try load(text).get())
    guard case .object(let members) = try JSONValue.parse(files.clientConfig),
      case .object(let capabilities)? = members["capabilities"]
    else {
      Issue.record("no capabilities")
      return
    }
    #expect(capabilities["attendance"] == .bool(on))
    #expect(capabilities["studentManagement"] == .bool(false) && capabilities["scheduling"] == .bool(false))
  }
}
