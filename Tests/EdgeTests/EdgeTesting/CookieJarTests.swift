import EdgeTesting
import Testing

/// The test client's cookie jar reads `Set-Cookie` as RFC 6265 §5.2 does.
@Suite("Cookie jar")
struct CookieJarTests {
  @Test(
    "one Set-Cookie over a jar holding a=0: what is kept",
    arguments: [
      ("a=1", "a=1"), ("b=2; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=60", "a=0; b=2"),
      ("a=1; Max-Age=0", nil), ("a=; Path=/; Max-Age=0", nil), ("a=1; max-age=-5", nil),
      ("a=1;Max-Age=0", nil), ("a=1; Max-Age = 0 ", nil), ("a=1; Max-Age=0; Max-Age=60", "a=1"),
      ("a=1; Max-Age=60; Max-Age=0", nil), ("a=1; Max-Age=soon", "a=1"), ("a=1; Max-Age=", "a=1"),
      ("a=1; Max-Age=99999999999999999999999", "a=1"), (" a = x y ", "a=x y"), ("a=b=c", "a=b=c"),
      ("no-equals-sign", "a=0"), ("=x", "a=0"), ("b=0; Max-Age=0", "a=0"),
    ] as [(String, String?)])
  func receive(setCookie: String, expected: String?) {
    var jar = CookieJar()
    jar["a"] = "0"
    jar.receive(setCookie)
    #expect(jar.header == expected, "\(setCookie)")
  }

  @Test("the jar keeps its order: a changed value keeps its place, a new cookie goes last")
  func order() {
    var jar = CookieJar()
    for value in ["x=1", "y=2", "z=3", "x=4"] { jar.receive(value) }
    #expect(jar.header == "x=4; y=2; z=3")
    jar["y"] = nil
    jar["w"] = "5"
    #expect(jar.names == ["x", "z", "w"])
  }
}
