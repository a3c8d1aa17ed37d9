import Deployment
import Edge
import Foundation
import TestSupport
import Testing

@testable import ClientAPI

@Suite("The display time zone in the configuration")
struct TimezoneConfigTests {
  @Test(
    "timezone: an IANA name this machine knows, Europe/London by default",
    arguments: [
      (nil, "Europe/London"), ("\"America/New_York\"", "America/New_York"), ("\"UTC\"", "UTC"),
      ("\"Mars/Olympus\"", nil), ("\"../etc/passwd\"", nil), ("\"/etc/localtime\"", nil), ("\"\"", nil),
      ("42", nil),
    ] as [(String?, String?)])
  func timezone(value: String?, expected: String?) throws {
    let directory = try TestDirectory.make("tz")
    defer { try? FileManager.default.removeItem(at: directory) }
    let config = directory.appendingPathComponent("config.json")
    try (value.map { "{\"timezone\": \($0)}" } ?? "{}").write(to: config, atomically: true, encoding: .utf8)
    let loaded = DeploymentLoader.load(environment: [:], configPath: config.path)
    switch (loaded, expected) {
    case (.success(let deployment), let expected?): #expect(deployment.timezone == expected)
    case (.failure(let problems), nil):
      #expect(problems.lines.count == 1 && problems.lines[0].contains("timezone"))
    default: Issue.record("\(value ?? "nil"): \(loaded)")
    }
  }
}
