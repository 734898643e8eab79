import AgentCore
import AgentHTTP
import HTTPTypes
import Hummingbird
import NIOCore

/// The file API's decoders of outside bytes, reachable from the fuzz targets (`Fuzz/`,
/// `make fuzz`) without a server or a file system. It exists for the fuzz targets only;
/// each call runs the code the routes run.
public enum FilesFuzzing {
    /// An edit the engine refused: the message the client gets.
    public struct EditRefusal: Error, Sendable {
        public let message: String
    }

    /// One edit-files edit applied to `content` in memory (``EditEngine``, as edit-files).
    public static func applyEdit(search: [UInt8], replacement: [UInt8], replaceAll: Bool, to content: [UInt8], path: String) throws(EditRefusal) -> [UInt8] {
        do {
            return try EditEngine.apply(.init(search: search, replacement: replacement, replaceAll: replaceAll), to: content, path: path)
        } catch let failure as EditEngine.Failure {
            throw EditRefusal(message: failure.message)
        } catch {
            throw EditRefusal(message: "\(error)")
        }
    }

    /// The unified diff edit-files answers with `include_diff`.
    public static func unifiedDiff(path: String, old: [UInt8], new: [UInt8]) -> String {
        UnifiedDiff.make(path: path, old: old, new: new)
    }

    /// One file of an edit-files body, as parsed.
    public struct RequestedFile: Sendable {
        public var path: String
        public var edits: [(search: [UInt8], replacement: [UInt8], replaceAll: Bool)]
        public var expectedSHA256: String?
    }

    /// An edit-files body parsed as the route parses it (before any file is touched).
    public static func editRequest(json: [UInt8]) throws(APIError) -> (includeDiff: Bool, files: [RequestedFile]) {
        let body = try JSONRequest.parse(json, typeName: "FileEditRequest")
        let includeDiff = try body.bool("include_diff") ?? false
        let files = try EditRoutes.parseFiles(body).map { file in
            RequestedFile(
                path: file.path, edits: file.edits.map { ($0.search, $0.replacement, $0.replaceAll) }, expectedSHA256: file.expected)
        }
        return (includeDiff, files)
    }

    /// read-file-lines' answer for a file holding `content`, with the query string `query`
    /// (what follows `?`), as the route computes it; query errors throw the route's 400.
    public static func readFileLines(
        query: String, content: [UInt8]
    ) throws(APIError) -> (
        window: (offset: Int, limit: Int, maxLineBytes: Int, maxResponseLines: Int, maxResponseBytes: Int),
        success: Bool, fileSize: Int, totalLines: Int, linesRead: Int, content: String, error: String
    ) {
        let (_, limits) = try ReadRoutes.readFileLinesQuery(request(query))
        let answer = LineWindow.render(content, limits: limits)
        return (
            (limits.offset, limits.limit, limits.maxLineBytes, limits.maxResponseLines, limits.maxResponseBytes),
            answer.success, answer.fileSize, answer.totalLines, answer.linesRead, answer.content, answer.error
        )
    }

    /// read-file's query parsed as the route parses it.
    public static func readFile(query: String) throws(APIError) -> (path: String, offset: Int, limit: Int) {
        try ReadRoutes.readFileQuery(request(query))
    }

    /// The tool-call headers (three, all or none) as a write or an edit reads them, with the
    /// chat the chat headers name (none if they name none, or are not valid); nil when no
    /// tool-call header is there.
    public static func toolCall(
        headers: [(String, String)]
    ) throws(APIError) -> (
        chatID: String, messageID: UInt64, callID: String, ageMs: UInt64, cancelID: String
    )? {
        var fields = HTTPFields()
        for (name, value) in headers {
            guard let name = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: name, value: value))
        }
        let chat = (try? ChatIdentity.from(fields)) ?? nil
        guard let (key, age) = try ToolCallKey.from(fields, chat: chat) else { return nil }
        return (key.chat, key.messageID, key.callID, age, key.cancelID)
    }

    /// `clean` as the file API cleans an absolute path (Go's `filepath.Clean`).
    public static func cleanPath(_ path: String) -> String {
        PathResolver.clean(path)
    }

    /// A GET request for `/?query`, as the HTTP layer hands one to a route.
    private static func request(_ query: String) -> Request {
        Request(
            head: HTTPRequest(method: .get, scheme: "http", authority: "localhost", path: "/api/v0/read-file-lines?" + query),
            body: RequestBody(buffer: ByteBuffer()))
    }
}
