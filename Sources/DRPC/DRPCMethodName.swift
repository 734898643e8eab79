/// An RPC name as the reference quotes it in its errors (Go's `%q`): in double quotes, with
/// `"`, `\`, newline, return and tab escaped and other control bytes as `\xHH`.
///
/// DRPC's own copy of AgentCore's `goQuote` (the same rules), so that the dRPC layer
/// depends on nothing of the agent's and can serve any transport on its own.
enum DRPCMethodName {
    static func quoted(_ name: String) -> String {
        var out = "\""
        out.reserveCapacity(name.utf8.count + 2)
        for scalar in name.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    let digits = String(scalar.value, radix: 16)
                    out += "\\x" + (digits.count < 2 ? "0" + digits : digits)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
