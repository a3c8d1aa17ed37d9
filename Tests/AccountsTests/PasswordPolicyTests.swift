import TestSupport
import Testing

@testable import Accounts

@Suite("The password policy")
struct PasswordPolicyTests {
  static let email: EmailAddress = "ada.lovelace-example@example.test"

  /// (password, the sentence's start, or nil when accepted).
  static let cases: [(String, String?)] = [
    ("", "Choose a password of at least 12"),
    ("short", "Choose a password of at least 12"),
    ("elevenchars", "Choose a password of at least 12"),
    ("ééééééééééé", "Choose a password of at least 12"),  // 11 characters, 22 bytes
    ("twelve chars", nil),
    ("ééééééééééééé", nil),
    ("a-long-demo-password-42", nil),
    ("correct horse battery staple", nil),
    (String(repeating: "x", count: 1025), "That password is longer"),
    (String(repeating: "x", count: 1024), nil),
    ("ada.lovelace-example@example.test", "Your password must not be your email"),
    ("ADA.Lovelace-Example@Example.TEST", "Your password must not be your email"),
    ("ada.lovelace-example", "Your password must not be your email"),
    ("Ada.Lovelace-Example", "Your password must not be your email"),
    ("ada.lovelace-example1", nil),
    ("password1234", "That password is one of the most common"),
    ("Password1234", "That password is one of the most common"),
    ("QWERTYUIOP123", "That password is one of the most common"),
    ("correcthorsebatterystaple", "That password is one of the most common"),
    ("bandlicence2025", "That password is one of the most common"),
    ("123456789012", "That password is one of the most common"),
    ("passwordpassword", "That password is one of the most common"),
  ]

  @Test(arguments: cases)
  func judges(_ password: String, _ expected: String?) {
    let problem = PasswordPolicy.problem(password, email: Self.email)
    if let expected {
      #expect(problem?.hasPrefix(expected) == true, "\(password): \(problem ?? "accepted")")
    } else {
      #expect(problem == nil, "\(password): \(problem ?? "")")
    }
  }

  @Test func everySentenceIsOneSentence() {
    for password in ["x", String(repeating: "x", count: 2000), "ada.lovelace-example", "password1234"] {
      let problem = PasswordPolicy.problem(password, email: Self.email) ?? ""
      #expect(problem.hasSuffix(".") && problem.filter { $0 == "." }.count == 1, "\(problem)")
    }
  }

  @Test func theListIsLowerCaseLongAndLarge() {
    #expect(CommonPasswords.all.count >= 300)
    for entry in CommonPasswords.all {
      #expect(entry == entry.lowercased() && entry.count >= PasswordPolicy.minimumCharacters, "\(entry)")
      // common-passwords.txt is one entry a line: no stray space or CR kept as part of one.
      #expect(
        entry.first?.isWhitespace == false && entry.last?.isWhitespace == false, "\(entry.debugDescription)")
    }
  }
}
