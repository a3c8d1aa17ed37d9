import Edge
import Testing

@testable import ExampleCore

@Suite("example-core runs in development only")
struct CoreSettingsTests {
  @Test(
    "BAND_LICENCE_ENV and the config file's environment",
    arguments: [
      (nil, nil, nil),
      ("", nil, nil),
      ("development", #"{"environment":"development"}"#, nil),
      (nil, #"{"origin":"http://127.0.0.1:8080"}"#, nil),
      ("staging", nil, "the example core is for development only; BAND_LICENCE_ENV is staging"),
      ("production", nil, "the example core is for development only; BAND_LICENCE_ENV is production"),
      ("develop", nil, "the example core is for development only; BAND_LICENCE_ENV is develop"),
      (
        nil, #"{"environment":"production"}"#,
        "the example core is for development only; c.json says production"
      ),
      (
        "development", #"{"environment":"staging"}"#,
        "the example core is for development only; c.json says staging"
      ),
      (nil, #"{"environment":1}"#, "c.json's environment is not a string"),
      (nil, "not json", "c.json is not a JSON object, so its environment is unknown"),
    ] as [(String?, String?, String?)])
  func environment(variable: String?, config: String?, refusal: String?) {
    #expect(
      CoreSettings.refusal(environment: variable, config: config.map { Array($0.utf8) }, configName: "c.json")
        == refusal)
  }

  @Test("loopback only, an http(s) JWKS, an issuer and an audience")
  func problems() {
    var settings = CoreSettings()
    #expect(settings.problems.isEmpty)
    settings.listen = .v4(host: "0.0.0.0", port: 8081)
    settings.jwks = "file:///etc/passwd"
    settings.audience = ""
    #expect(
      settings.problems == [
        "the example core listens on a loopback address only",
        "the JWKS address is an http:// or https:// URL",
        "the issuer and the audience cannot be empty",
      ])
  }
}
