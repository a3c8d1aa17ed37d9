import Accounts
import Deployment
import Edge

/// Renders the HTML page for an error answered to a browser (404, 405, ...): the status and the
/// plain-language message in, a whole response out.
public typealias ErrorPage = @Sendable (_ status: Status, _ message: String) -> Response

/// The HTML pages for errors a browser is answered with (404, 405, 400, 413, 503, ...): a title,
/// a plain sentence and a link home inside the shell's header and footer. The composition's error
/// renderer uses them only for browsers (`Accept` names `text/html`) outside `/api/` and
/// `/.well-known/`; everyone else keeps the plain or JSON body.
public enum ErrorPages {
  /// The page renderer for the composition's error renderer; `stylesheet` is the shell's
  /// fingerprinted one.
  public static func renderer(deployment: Deployment, stylesheet: String?) -> ErrorPage {
    { status, message in page(status, message, deployment: deployment, stylesheet: stylesheet) }
  }

  /// The page for `status`; `message` (the engine's plain sentence) is shown where this module has
  /// no better one of its own.
  static func page(_ status: Status, _ message: String, deployment: Deployment, stylesheet: String?)
    -> Response
  {
    let (title, sentence) = wording(status)
    return HTMLPage.problemPage(title, sentence ?? message, next: ("/", "Go to the start page"))
      .response(status, deployment: deployment, stylesheet: stylesheet)
  }

  /// A title and, where the status says it all, the sentence for the person.
  static func wording(_ status: Status) -> (title: String, sentence: String?) {
    switch status.code {
    case 400: ("Bad request", nil)
    case 404:
      ("Page not found", "There is no page at this address. Check the link, or start from the start page.")
    case 405: ("Not possible here", "This page cannot be used that way. Start again from the start page.")
    case 408: ("Too slow", "The request took too long to arrive. Try again.")
    case 413: ("Too large", nil)
    case 414: ("Address too long", "This address is too long to be a Band Licence page.")
    case 429:
      (
        "Too many requests",
        "There have been too many requests from your network. Wait a moment, then try again."
      )
    case 431: ("Request too large", nil)
    case 500: ("Something went wrong", "Something went wrong on our side. Please try again.")
    case 501: ("Not possible here", "This page cannot be used that way. Start again from the start page.")
    case 503: ("Busy just now", "Band Licence is busy just now. Wait a moment, then try again.")
    case 500...: ("Something went wrong", nil)
    default: ("This cannot be shown", nil)
    }
  }
}
