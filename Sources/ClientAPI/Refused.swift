import Edge

/// An answer given instead of going on: a form or an endpoint refused, carried through `Result`
/// (whose failure must be an `Error`) to where it is answered.
struct Refused: Error {
  let response: Response
  init(_ response: Response) { self.response = response }
}
