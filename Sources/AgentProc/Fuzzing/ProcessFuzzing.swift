import AgentHTTP
import Hummingbird
import HummingbirdCore

/// The process API's request decoding, for the fuzz targets (`Fuzz/`, `make fuzz`): what
/// `POST /start` makes of a body and `{id}` of a path segment, without starting anything.
/// It exists for the fuzz targets only.
public enum ProcessFuzzing {
    /// A start body's fields as the route reads them (400 as the route answers).
    public static func startRequest(json: [UInt8]) throws(APIError) -> (
        command: String, workdir: String?, env: [String: String]?, background: Bool, options: StartOptions
    ) {
        let fields = try ProcessRoutes.startRequest(JSONRequest.parse(json, typeName: "StartProcessRequest"))
        return (fields.command, fields.workdir, fields.env, fields.background, fields.options)
    }

    /// Whether `GET /{id}/output?<query>` is accepted (as the route checks it before anything
    /// waits); a refusal is a 400, never a trap.
    public static func outputQueryAccepted(_ query: String) -> Bool {
        (try? OutputQuery(URI("/output?" + query).queryParameters, maxWait: .seconds(300))) != nil
    }

    /// Matches `literal` against output written in `chunks`: the first `caughtUp` chunks
    /// are read back as an await's catch-up, the rest arrive live; the offset of the first
    /// matching line, if any.
    public static func literalMatchOffset(_ literal: [UInt8], chunks: [[UInt8]], caughtUp: Int) -> UInt64? {
        let watch = OutputWatch(condition: .literal(literal), from: 0)
        var offset: UInt64 = 0
        for (index, chunk) in chunks.enumerated() {
            if index < caughtUp {
                watch.catchUp(chunk, at: offset)
            } else {
                if index == caughtUp { watch.endCatchUp() }
                chunk.withUnsafeBytes { watch.feed($0, at: offset) }
            }
            offset += UInt64(chunk.count)
        }
        if caughtUp >= chunks.count { watch.endCatchUp() }
        watch.outputEnded()
        return watch.match?.offset
    }

    /// The `{id}` of a raw path segment, percent-decoded as the routes see it.
    public static func processID(_ raw: String) -> String {
        ProcessRoutes.processID(raw)
    }
}
