//! How long a recording is, read from its header where that is cheap: WAV (the data chunk's
//! size over the byte rate) and Ogg (the last page's granule position over the sample rate:
//! 48 kHz for Opus, the identification header's rate for Vorbis), the formats voice notes come
//! in from Element (Ogg Opus), Android recorders and the tests' espeak-ng (WAV). Other formats
//! (MP3, M4A) are `None`: their length is checked against the limit only where the sender
//! said it, and billed by what the server reports.

/// The length of `bytes` in seconds, if its format tells it cheaply.
pub fn seconds(bytes: &[u8]) -> Option<f64> {
    if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WAVE") {
        wav(bytes)
    } else if bytes.starts_with(b"OggS") {
        ogg(bytes)
    } else {
        None
    }
}

fn u32_le(bytes: &[u8], at: usize) -> Option<u32> {
    let slice = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(slice.try_into().ok()?))
}

/// WAV: walks the chunks for `fmt ` (byte rate at its offset 8) and `data` (its size).
fn wav(bytes: &[u8]) -> Option<f64> {
    let mut at = 12usize;
    let mut byte_rate = None;
    while at.checked_add(8)? <= bytes.len() {
        let id = bytes.get(at..at + 4)?;
        let size = u32_le(bytes, at + 4)?;
        match id {
            b"fmt " => byte_rate = u32_le(bytes, at + 16),
            b"data" => {
                let rate = byte_rate.filter(|&rate| rate > 0)?;
                // A streamed WAV may say 0 or u32::MAX: the bytes present are what there is.
                let present = bytes.len().saturating_sub(at + 8) as u64;
                let size = u64::from(size).min(present);
                return Some(size as f64 / f64::from(rate));
            }
            _ => {}
        }
        at = at
            .checked_add(8)?
            .checked_add(usize::try_from(size).ok()?)?;
        at += at % 2; // Chunks are padded to an even length.
    }
    None
}

/// Ogg: the granule position of the last page, over the codec's sample rate.
fn ogg(bytes: &[u8]) -> Option<f64> {
    let rate = if bytes.windows(8).take(512).any(|w| w == b"OpusHead") {
        48_000
    } else {
        let at = bytes
            .windows(7)
            .take(512)
            .position(|w| w == b"\x01vorbis")?;
        u32_le(bytes, at + 12)?
    };
    let last = bytes.windows(4).rposition(|w| w == b"OggS")?;
    let granule = bytes.get(last + 6..last + 14)?;
    let granule = u64::from_le_bytes(granule.try_into().ok()?);
    if rate == 0 || granule == u64::MAX {
        return None;
    }
    Some(granule as f64 / f64::from(rate))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav_of(seconds: u32, rate: u32) -> Vec<u8> {
        let data = vec![0u8; (seconds * rate * 2) as usize];
        let mut bytes = b"RIFF".to_vec();
        bytes.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
        bytes.extend_from_slice(b"WAVEfmt ");
        bytes.extend_from_slice(&16u32.to_le_bytes());
        bytes.extend_from_slice(&1u16.to_le_bytes()); // PCM
        bytes.extend_from_slice(&1u16.to_le_bytes()); // mono
        bytes.extend_from_slice(&rate.to_le_bytes());
        bytes.extend_from_slice(&(rate * 2).to_le_bytes());
        bytes.extend_from_slice(&2u16.to_le_bytes());
        bytes.extend_from_slice(&16u16.to_le_bytes());
        bytes.extend_from_slice(b"data");
        bytes.extend_from_slice(&(data.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&data);
        bytes
    }

    fn ogg_page(granule: u64, payload: &[u8]) -> Vec<u8> {
        let mut page = b"OggS\x00\x00".to_vec();
        page.extend_from_slice(&granule.to_le_bytes());
        page.extend_from_slice(&[0; 12]);
        page.push(1);
        page.push(payload.len() as u8);
        page.extend_from_slice(payload);
        page
    }

    #[test]
    fn lengths_come_from_wav_and_ogg_headers() {
        assert_eq!(seconds(&wav_of(3, 22_050)), Some(3.0));
        let mut opus = ogg_page(0, b"OpusHead\x01\x01");
        opus.extend(ogg_page(48_000 * 5 / 2, b"audio"));
        assert_eq!(seconds(&opus), Some(2.5));
        let mut vorbis = ogg_page(0, b"\x01vorbis\x00\x00\x00\x00\x01\x44\xac\x00\x00");
        vorbis.extend(ogg_page(44_100 * 2, b"audio"));
        assert_eq!(seconds(&vorbis), Some(2.0));
        assert_eq!(seconds(b"ID3\x03 an mp3"), None);
        assert_eq!(seconds(b"RIFF\x00\x00\x00\x00WAVE"), None);
    }
}
