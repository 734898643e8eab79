import AgentCore

/// File names as text (AgentCore's FilePathText): decoding any bytes and encoding the text
/// must give the same bytes back (the mapping is a bijection between byte strings and the
/// texts decoding makes), valid UTF-8 outside the escape range passes through unchanged,
/// and encoding any text then decoding and encoding again is stable.
public func fuzzFilePathText(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = FuzzInput(data, size).bytes
    let text = FilePathText.decode(bytes)
    require(FilePathText.encode(text) == bytes, "bytes -> text -> bytes is not the identity")
    if let valid = String(validating: bytes, as: UTF8.self),
        !valid.unicodeScalars.contains(where: { $0.value >= FilePathText.escapeBase && $0.value <= FilePathText.escapeBase + 0xFF })
    {
        require(Array(text.utf8) == bytes, "valid UTF-8 was changed")
    }
    require(text.unicodeScalars.count <= bytes.count, "more characters than bytes")
    FilePathText.withCString(text) { pointer in
        var length = 0
        while pointer[length] != 0, length <= bytes.count { length += 1 }
        let cut = bytes.firstIndex(of: 0) ?? bytes.count
        require(length == cut, "the C string is not the bytes up to the first NUL")
    }
    // Arbitrary text (the input read as UTF-8, invalid bytes replaced) encodes to bytes
    // that decode to a text encoding to the same bytes.
    let other = String(decoding: bytes, as: UTF8.self)
    let encoded = FilePathText.encode(other)
    require(FilePathText.encode(FilePathText.decode(encoded)) == encoded, "text -> bytes -> text -> bytes is not stable")
    return 0
}
