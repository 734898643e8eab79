import AgentCore
import AgentHTTP
import HTTPTypes

#if canImport(Glibc)
import Glibc
#endif

/// A failed file-system call, answered as the reference does: not-exist 404, permission 403,
/// anything else 500, with the OS error text as the message.
struct FileSystemError: Error, CustomStringConvertible {
    /// Go's form: `open /a/b: no such file or directory`.
    var operation: String
    var path: String
    var code: Int32

    var description: String {
        // EINVAL from the file API's own checks: a FIFO, socket or device where a regular
        // file must be.
        let reason = code == EINVAL && operation == "open" ? "not a regular file" : SystemCallError.message(code)
        return "\(operation) \(path): \(reason)"
    }

    /// ENOTDIR (a file where a directory must be) is a 500 as in the reference, but where
    /// parents are made (``makingDirectoriesError``): there the client named a file as a
    /// parent, a 400.
    var status: HTTPResponse.Status {
        switch code {
        case ENOENT: .notFound
        case EACCES, EPERM: .forbidden
        case EISDIR, EINVAL: .badRequest
        default: .internalServerError
        }
    }

    var apiError: APIError { APIError(status, description) }

    /// The answer when making a path's parent directories failed: ENOTDIR is a 400 there.
    var makingDirectoriesError: APIError { code == ENOTDIR ? APIError(.badRequest, description) : apiError }

    /// The current errno for `operation` on `path`.
    static func last(_ operation: String, _ path: String) -> FileSystemError {
        FileSystemError(operation: operation, path: path, code: errno)
    }
}
