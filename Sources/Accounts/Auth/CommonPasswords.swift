/// Passwords too common to choose: about a thousand passwords and phrases of 12
/// characters or more that appear in breach lists and guessing dictionaries, and obvious words of
/// this product, all lower-case. `PasswordPolicy` compares a lower-cased candidate against them.
enum CommonPasswords {
  /// The list, lower-case: `common-passwords.txt`, one a line, compiled in by Plugins/EmbedFiles.
  static let all: Set<String> = Set(EmbeddedFiles.commonPasswords.split(separator: "\n").map(String.init))
}
