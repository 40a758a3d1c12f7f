//! Files uuencoded into a mail's text (`begin 644 name` … `end`), as old clients (Outlook
//! Express, some mailing-list software) still send them: decoded into attachments, so the
//! agent gets a file and not a page of line noise.
//!
//! The format is a few lines of arithmetic (each line: a length character, then groups of
//! four characters of six bits each); the crates that decode it are unmaintained one-offs, so
//! it is written here.

/// One decoded file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The name on its `begin` line.
    pub name: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// `text` with each well-formed uuencoded block replaced by a note naming its file, and the
/// files; a block that does not decode is left as it is.
pub fn extract(text: &str) -> (String, Vec<Decoded>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = Vec::new();
    let mut files = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        if let Some(name) = begin_name(lines[at])
            && let Some((bytes, end)) = decode_block(&lines[at + 1..])
        {
            out.push(format!("[uuencoded file {name}: decoded and attached]"));
            files.push(Decoded {
                name: name.to_owned(),
                bytes,
            });
            at += end + 2;
            continue;
        }
        out.push(lines[at].to_owned());
        at += 1;
    }
    if files.is_empty() {
        return (text.to_owned(), files);
    }
    (out.join("\n"), files)
}

/// The file name of a `begin <octal mode> <name>` line.
fn begin_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("begin ")?;
    let (mode, name) = rest.split_once(' ')?;
    let octal = mode.len() == 3 && mode.bytes().all(|b| (b'0'..=b'7').contains(&b));
    let name = name.trim();
    (octal && !name.is_empty()).then_some(name)
}

/// Decodes the lines after `begin` up to `end`; the bytes and the index of the `end` line.
fn decode_block(lines: &[&str]) -> Option<(Vec<u8>, usize)> {
    let mut bytes = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let line = line.trim_end_matches('\r');
        if line == "end" {
            return Some((bytes, index));
        }
        let encoded = line.as_bytes();
        let &first = encoded.first()?;
        let length = usize::from(first.wrapping_sub(b' ') & 0x3f);
        if length == 0 {
            continue;
        }
        let sextets: Vec<u8> = encoded[1..]
            .iter()
            .map(|c| c.wrapping_sub(b' ') & 0x3f)
            .collect();
        if sextets.len() < length.div_ceil(3) * 4 {
            return None;
        }
        let mut line_bytes = Vec::with_capacity(length + 2);
        for group in sextets.chunks(4).take(length.div_ceil(3)) {
            let [a, b, c, d] = [group[0], group[1], group[2], group[3]];
            line_bytes.push((a << 2) | (b >> 4));
            line_bytes.push((b << 4) | (c >> 2));
            line_bytes.push((c << 6) | d);
        }
        line_bytes.truncate(length);
        bytes.extend(line_bytes);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuencoded_file_becomes_an_attachment() {
        // As Python's binascii.b2a_uu encodes them (backtick for zero), and a longer line.
        let text = "Here it is:\n\nbegin 644 cat.txt\n$0V%T\"@``\n`\nend\n\nbye";
        let (body, files) = extract(text);
        assert_eq!(
            body,
            "Here it is:\n\n[uuencoded file cat.txt: decoded and attached]\n\nbye"
        );
        assert_eq!(
            files,
            [Decoded {
                name: "cat.txt".into(),
                bytes: b"Cat\n".to_vec()
            }]
        );
        let long = "begin 600 a.bin\nM:&5L;&\\@=V]R;&0@:&5L;&\\@=V]R;&0@:&5L;&\\@=V]R;&0@:&5L;&\\@=V]R\n\";&0`\n`\nend";
        let (_, files) = extract(long);
        assert_eq!(files[0].bytes.len(), 47);
        assert!(files[0].bytes.ends_with(b"hello world"));
        // Not a block: left alone.
        let prose = "begin 644 is how it starts\nbut no end";
        assert_eq!(extract(prose), (prose.to_owned(), Vec::new()));
    }
}
