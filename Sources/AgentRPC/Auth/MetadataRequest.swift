/// One request to a cloud's instance metadata service (plain HTTP, never coderd's token).
public struct MetadataRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]

    public init(method: String, url: String, headers: [(String, String)]) {
        self.method = method
        self.url = url
        self.headers = headers
    }
}
