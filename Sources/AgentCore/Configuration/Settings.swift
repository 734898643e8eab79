/// Reads a module's settings: each flag has an environment twin, and the flag wins.
///
/// A module's options type declares its flags with ArgumentParser and resolves each with
/// one call here, naming the flag and its variable side by side:
///
/// ```swift
/// let priority = try settings.bool(procPrioMgmt, flag: "--proc-prio-mgmt", variable: "CODER_PROC_PRIO_MGMT") ?? true
/// ```
///
/// Errors name where the bad value came from (the flag or the variable), in one line.
public struct Settings: Sendable {
    /// The process environment the twins are read from.
    public let environment: [String: String]

    public init(environment: [String: String]) {
        self.environment = environment
    }

    /// A value and where it came from ("--flag" or "VARIABLE").
    public struct Value: Sendable, Equatable {
        public var text: String
        public var source: String
    }

    /// The flag's value, else the variable's when it is set and not empty, else nil.
    public func value(_ flagValue: String?, flag: String, variable: String) -> Value? {
        if let flagValue { return Value(text: flagValue, source: flag) }
        if let text = environment[variable], !text.isEmpty { return Value(text: text, source: variable) }
        return nil
    }

    /// As ``value(_:flag:variable:)``, but an empty variable counts as set (for settings
    /// where empty means "off", such as a listener address).
    public func valueAllowingEmpty(_ flagValue: String?, flag: String, variable: String) -> Value? {
        if let flagValue { return Value(text: flagValue, source: flag) }
        if let text = environment[variable] { return Value(text: text, source: variable) }
        return nil
    }

    /// A string setting; a NUL byte is refused (it cannot reach a path or a child).
    public func string(_ flagValue: String?, flag: String, variable: String) throws(ConfigurationError) -> String? {
        guard let value = value(flagValue, flag: flag, variable: variable) else { return nil }
        if value.text.contains("\0") { throw ConfigurationError("\(value.source): contains a NUL byte") }
        return value.text
    }

    /// A boolean: 1/true/yes/on or 0/false/no/off, any case.
    public func bool(_ flagValue: String?, flag: String, variable: String) throws(ConfigurationError) -> Bool? {
        guard let value = value(flagValue, flag: flag, variable: variable) else { return nil }
        switch value.text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigurationError("\(value.source): invalid boolean \"\(value.text)\" (expected true or false)")
        }
    }

    /// A setting parsed by `parse`, whose error text is prefixed with the source.
    public func parsed<T>(
        _ flagValue: String?, flag: String, variable: String, allowEmpty: Bool = false,
        _ parse: (String) throws -> T
    ) throws(ConfigurationError) -> T? {
        let found =
            allowEmpty
            ? valueAllowingEmpty(flagValue, flag: flag, variable: variable)
            : value(flagValue, flag: flag, variable: variable)
        guard let found else { return nil }
        do {
            return try parse(found.text)
        } catch {
            throw ConfigurationError("\(found.source): \(error)")
        }
    }
}

/// A bad setting: one line naming the flag or variable and what is accepted. The agent
/// exits with status 64 (EX_USAGE) and prints it.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
