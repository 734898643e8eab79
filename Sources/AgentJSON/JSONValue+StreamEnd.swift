extension JSONValue {
    /// Where the first JSON value of a stream ends in `bytes` (the index after it), or nil
    /// while it is incomplete (``JSONValueBoundary``, for bytes that are all at hand).
    public static func endOfFirstValue(in bytes: some Collection<UInt8>) -> Int? {
        var boundary = JSONValueBoundary()
        return boundary.scan(bytes)
    }
}
