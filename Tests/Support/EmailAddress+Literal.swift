import Accounts

/// Tests name addresses as literals; production code must go through `EmailAddress.init?`.
extension EmailAddress: ExpressibleByStringLiteral {
  public init(stringLiteral value: String) {
    guard let address = EmailAddress(value) else { fatalError("\(value) is not an email address") }
    self = address
  }
}
