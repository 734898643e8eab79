import AgentHTTP
import Hummingbird

/// The reference's strict query parameters: an unknown parameter, a missing required one or
/// a negative number is a 400 `Query parameters have invalid values.` with validations.
struct StrictQuery {
    private let parameters: [String: String]
    private var problems: [APIErrorBody.Validation] = []

    init(_ request: Request, allowed: Set<String>) {
        // As Go reads a query (`+` a space, a name's first value): ``GoQuery``.
        let query = GoQuery(request)
        var parameters: [String: String] = [:]
        var problems: [APIErrorBody.Validation] = []
        for name in query.names {
            if !allowed.contains(name) {
                problems.append(.init(field: name, detail: "Query param \"\(name)\" is not a valid query param"))
            }
            parameters[name] = query.get(name)
        }
        self.parameters = parameters
        self.problems = problems
    }

    mutating func string(_ name: String, required: Bool = false) -> String? {
        guard let value = parameters[name], !value.isEmpty else {
            if required { problems.append(.init(field: name, detail: "Query param \"\(name)\" is required and cannot be empty")) }
            return nil
        }
        return value
    }

    mutating func int(_ name: String, default fallback: Int) -> Int {
        guard let text = parameters[name], !text.isEmpty else { return fallback }
        guard let value = Int(text) else {
            problems.append(.init(field: name, detail: "Query param \"\(name)\" must be a valid integer"))
            return fallback
        }
        guard value >= 0 else {
            problems.append(.init(field: name, detail: "Query param \"\(name)\" value is negative"))
            return fallback
        }
        return value
    }

    /// Throws the 400 if anything was wrong.
    func validate() throws(APIError) {
        guard problems.isEmpty else {
            throw APIError(.badRequest, "Query parameters have invalid values.", validations: problems)
        }
    }
}
