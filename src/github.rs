//! GitHub workflow commands: `::error file=F,line=L,col=C,title=T::message`, the
//! annotations a GitHub Actions runner shows on the lines of a pull request. Both property
//! values and the message are escaped as the runner reads them, so text from a budget file
//! cannot end the command or start another, and no other control character reaches the
//! log raw.

/// One annotation: its level (`error`, `warning`, `notice`), its properties in order and
/// its message.
pub fn annotation(level: &str, properties: &[(&str, String)], message: &str) -> String {
    let properties: Vec<String> =
        properties.iter().map(|(key, value)| format!("{key}={}", escape_property(value))).collect();
    format!("::{level} {}::{}", properties.join(","), escape_data(message))
}

/// `%`, CR and LF as the runner decodes them; any other control character (ESC, C1, a
/// bidirectional override) percent-encoded too, which the runner shows as it is.
fn escape_data(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\r' => out.push_str("%0D"),
            '\n' => out.push_str("%0A"),
            c if allot_compiler::escape::is_hidden(c) => {
                let mut bytes = [0; 4];
                for byte in c.encode_utf8(&mut bytes).bytes() {
                    out.push_str(&format!("%{byte:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_cannot_end_the_command_or_hide_in_the_log() {
        let line = annotation("error", &[("file", "a,b:c".into())], "x\r\n::warning::forged\x1b[2J 100%");
        assert_eq!(line, "::error file=a%2Cb%3Ac::x%0D%0A::warning::forged%1B[2J 100%25");
    }
}
