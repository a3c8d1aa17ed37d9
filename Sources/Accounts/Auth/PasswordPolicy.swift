/// What a new password must be, checked wherever a password is set — recovery, a first
/// password, a change on `/account`, an accepted invitation — and never at sign-in, so that
/// passwords chosen before the policy keep working.
public enum PasswordPolicy {
  /// The fewest characters a new password may have.
  public static let minimumCharacters = 12
  /// The most bytes of UTF-8 a password may have (what sign-in reads: a longer one could never
  /// sign in).
  public static let maximumBytes = 1024

  /// Why `password` cannot be the password of the account with `email`, in one sentence for the
  /// person choosing it; nil when it can. Characters are counted as people see them; the email,
  /// its local part and the shipped list of common passwords are compared lower-cased.
  public static func problem(_ password: String, email: EmailAddress) -> String? {
    if password.count < minimumCharacters {
      return
        "Choose a password of at least \(minimumCharacters) characters: a short phrase is easy to remember."
    }
    if password.utf8.count > maximumBytes {
      return "That password is longer than Band Licence accepts: choose a shorter one."
    }
    let lowered = password.lowercased()
    let address = email.normalised.lowercased()
    let local = address.split(separator: "@").dropLast().joined(separator: "@")
    if lowered == address || lowered == local {
      return "Your password must not be your email address: choose something else."
    }
    if CommonPasswords.all.contains(lowered) {
      return "That password is one of the most common, so it is easy to guess: choose another."
    }
    return nil
  }
}
