import AgentHTTP
import HTTPTypes

/// File-system calls take C strings: a NUL in a path would silently cut it, and the call
/// would act on the path before the NUL and report success. Every path a client sends is
/// checked first: 400 naming the field, as the process API answers, and nothing is done.
enum PathInput {
    /// Whether `path` starts with a `/` byte. (`hasPrefix("/")` compares `Character`s: a
    /// path whose first part starts with a combining mark, one grapheme with the `/`,
    /// would not count as absolute.)
    static func isAbsolute(_ path: String) -> Bool {
        path.utf8.first == UInt8(ascii: "/")
    }

    static func rejectNUL(_ value: String?, field: String) throws(APIError) {
        guard let value, value.utf8.contains(0) else { return }
        throw APIError(
            .badRequest, "Request contains a NUL byte.", detail: "\(field) contains a NUL byte.",
            validations: [.init(field: field, detail: "must not contain a NUL byte")])
    }
}
