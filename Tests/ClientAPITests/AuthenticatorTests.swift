import Edge
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI

/// The one authenticator's decisions before the store is read, case by case.
@Suite struct AuthenticatorTests {
  static let cases: [(headers: [(String, String)], unsafe: Bool, expected: AuthFailure?, why: String)] = [
    ([], false, .missing, "nothing presented"),
    ([("Authorization", "Basic dG9tOnB3")], false, .malformed, "another scheme"),
    ([("Authorization", "Bearer")], false, .malformed, "a scheme without a token"),
    ([("Authorization", "bearer abc")], false, nil, "the scheme in any case"),
    (
      [("Authorization", "Bearer abc"), ("Band-Licence-Client", "ios/1.3.9")], false,
      .appVersionUnsupported(minimum: "1.4.0"), "an iOS app below the minimum"
    ),
    ([("Authorization", "Bearer abc"), ("Band-Licence-Client", "ios/1.4.0")], true, nil, "at the minimum"),
    (
      [("Authorization", "Bearer abc"), ("Band-Licence-Client", "windows/1.0")], false, .invalidClient,
      "an unknown platform"
    ),
    ([("Cookie", "__Host-bl_session=abc")], false, nil, "a cookie reading"),
    ([("Cookie", "__Host-bl_session=abc")], true, .crossOrigin, "a cookie change without Origin"),
    (
      [("Cookie", "__Host-bl_session=abc"), ("Origin", "https://elsewhere.example.test")], true, .crossOrigin,
      "a cookie change from another origin"
    ),
    (
      [("Authorization", "Bearer abc"), ("Cookie", "__Host-bl_session=abc")], true, nil,
      "a Bearer token wins over the cookie: no Origin needed"
    ),
  ]

  @Test(arguments: cases.indices)
  func precheck(index: Int) throws {
    let f = try SessionFixture(.sqlite)
    let c = Self.cases[index]
    let request = Request(
      method: c.unsafe ? .delete : .get, target: "/api/client/v1/session", headers: c.headers)
    let failure = f.api.context.authenticator.precheck(request, Credential(request), unsafe: c.unsafe)
    #expect(failure == c.expected, "\(c.why)")
  }

  @Test func aSameOriginCookieChangePasses() throws {
    let f = try SessionFixture(.sqlite)
    let origin = f.api.context.deployment.origin
    let request = Request(
      method: .delete, target: "/api/client/v1/session",
      headers: [("Cookie", "__Host-bl_session=abc"), ("Origin", origin)])
    #expect(f.api.context.authenticator.precheck(request, Credential(request), unsafe: true) == nil)
  }

  @Test func eachFailureAnswersItsStatus() {
    let expected: [(AuthFailure, Int)] = [
      (.missing, 401), (.malformed, 401), (.invalidToken, 401), (.invalidClient, 400),
      (.appVersionUnsupported(minimum: "2.0"), 426), (.crossOrigin, 403),
    ]
    for (failure, status) in expected {
      #expect(failure.response.status.code == status, "\(failure)")
    }
    #expect(
      AuthFailure.missing.response.headers.first { $0.name == "WWW-Authenticate" }?.value
        == "Bearer realm=\"band-licence\"")
  }
}
