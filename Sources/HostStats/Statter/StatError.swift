/// A failed reading worded as the reference's wrapped Go errors (`get total cpu: get cpu
/// period: …`), keeping what its `errors.Is` checks look for through the wrapping.
public struct StatError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
    /// `errors.Is(err, fs.ErrNotExist)`.
    public let notExist: Bool
    /// `errors.Is(err, strconv.ErrSyntax)`.
    public let syntax: Bool

    public init(_ description: String, notExist: Bool = false, syntax: Bool = false) {
        self.description = description
        self.notExist = notExist
        self.syntax = syntax
    }

    init(_ error: FileError) {
        self.init(error.description, notExist: error.notExist)
    }

    /// `xerrors.Errorf("<context>: %w", err)`.
    public func wrapped(_ context: String) -> StatError {
        StatError(context + ": " + description, notExist: notExist, syntax: syntax)
    }

    /// hashicorp/go-multierror's text for several errors (the v1 paths tried in turn).
    static func multiple(_ errors: [StatError]) -> StatError {
        if errors.count == 1 { return StatError("1 error occurred:\n\t* \(errors[0])\n\n") }
        let points = errors.map { "* \($0)" }.joined(separator: "\n\t")
        return StatError("\(errors.count) errors occurred:\n\t\(points)\n\n")
    }
}
