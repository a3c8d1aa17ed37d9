import Deployment
import Synchronization

/// The example core's data, in memory: one fictional roster, the same in every school, and the
/// attendance marks recorded in each. School IDs are random per database (`admin seed-demo` makes
/// new ones each time), so a school is whatever school a verified assertion names: band-edge has
/// already checked that the caller is a member there.
public final class SchoolRecords: Sendable {
  /// A fictional student.
  public struct Student: Sendable {
    /// `stu_…`.
    public let id: String
    /// A made-up name.
    public let name: String
    /// A made-up ensemble.
    public let group: String
  }

  /// One attendance mark: a student on a date, at most one per pair (a later one replaces it).
  public struct Mark: Equatable, Sendable {
    public let student: String
    public let date: String
    public let status: String
    public let recordedBy: String
    public let recordedAt: Int
  }

  /// The statuses a mark may have.
  public static let statuses: Set<String> = ["present", "absent", "late", "excused"]

  /// The roster: every name made up.
  public static let roster: [Student] = [
    ("Ada Example", "Strings"), ("Ben Sample", "Strings"), ("Cleo Fixture", "Brass"),
    ("Dev Placeholder", "Brass"), ("Esme Mock", "Woodwind"), ("Finn Stub", "Woodwind"),
    ("Gus Dummy", "Percussion"), ("Hana Specimen", "Percussion"),
  ].enumerated().map { index, person in
    Student(id: "stu_\(index + 1)", name: person.0, group: person.1)
  }

  private let marks = Mutex<[String: [Mark]]>([:])

  /// No marks yet.
  public init() {}

  /// `{"students":[{"id","name","group"},…]}`.
  public func students() -> JSONValue {
    .object([
      "students": .array(
        Self.roster.map {
          .object(["id": .string($0.id), "name": .string($0.name), "group": .string($0.group)])
        })
    ])
  }

  /// `{"attendance":[mark,…]}` for `school`, by date then student.
  public func attendance(school: String) -> JSONValue {
    let list = marks.withLock { $0[school] ?? [] }
    return .object(["attendance": .array(list.map(Self.json))])
  }

  /// Records `mark` in `school`, replacing the one of its student and date; says whether it is new.
  public func record(_ mark: Mark, school: String) -> Bool {
    marks.withLock { marks in
      var list = marks[school] ?? []
      let earlier = list.firstIndex { $0.student == mark.student && $0.date == mark.date }
      if let earlier { list.remove(at: earlier) }
      list.append(mark)
      list.sort { ($0.date, $0.student) < ($1.date, $1.student) }
      marks[school] = list
      return earlier == nil
    }
  }

  /// A mark as JSON.
  public static func json(_ mark: Mark) -> JSONValue {
    .object([
      "studentId": .string(mark.student), "date": .string(mark.date), "status": .string(mark.status),
      "recordedBy": .string(mark.recordedBy), "recordedAt": .number(Double(mark.recordedAt)),
    ])
  }
}
