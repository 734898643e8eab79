import AgentHTTP

/// The process API's request decoding, for the fuzz targets (`Fuzz/`, `make fuzz`): what
/// `POST /start` makes of a body and `{id}` of a path segment, without starting anything.
/// It exists for the fuzz targets only.
public enum ProcessFuzzing {
    /// A start body's fields as the route reads them (400 as the route answers).
    public static func startRequest(json: [UInt8]) throws(APIError) -> (
        command: String, workdir: String?, env: [String: String]?, background: Bool
    ) {
        try ProcessRoutes.startRequest(JSONRequest.parse(json, typeName: "StartProcessRequest"))
    }

    /// The `{id}` of a raw path segment, percent-decoded as the routes see it.
    public static func processID(_ raw: String) -> String {
        ProcessRoutes.processID(raw)
    }
}
