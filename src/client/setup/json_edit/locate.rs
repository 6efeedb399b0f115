//! Where each value of a JSON text is. The text has already been parsed
//! by serde_json (with comments and trailing commas blanked to spaces by
//! [`super::blank`], which keeps every offset), so this only locates, and
//! gives up (`None`) on anything odd.

use super::MAX_DEPTH;

/// One JSON value's place in the text: `text[start..end]`.
pub struct Node {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

pub enum Kind {
    Object(Vec<Member>),
    Array(Vec<Node>),
    Scalar,
}

/// `"key": value` in an object; the member's text starts at `start`.
pub struct Member {
    pub key: String,
    pub start: usize,
    pub value: Node,
}

impl Member {
    pub fn end(&self) -> usize {
        self.value.end
    }
}

/// Finds where each value is; the text has already been parsed by
/// serde_json, so this only locates, and gives up (`None`) on anything odd.
pub struct Parser<'a> {
    text: &'a str,
    at: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    pub fn new(text: &'a str) -> Self {
        Self {
            text,
            at: 0,
            depth: 0,
        }
    }

    pub fn document(mut self) -> Option<Node> {
        let root = self.value()?;
        self.skip_space();
        (self.at == self.text.len()).then_some(root)
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.skip_space();
        (self.peek() == Some(byte)).then(|| self.at += 1)
    }

    fn value(&mut self) -> Option<Node> {
        self.skip_space();
        let start = self.at;
        let kind = match self.peek()? {
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return None;
                }
                let kind = if self.peek() == Some(b'{') {
                    self.object()?
                } else {
                    self.array()?
                };
                self.depth -= 1;
                kind
            }
            b'"' => {
                self.string()?;
                Kind::Scalar
            }
            _ => {
                while self
                    .peek()
                    .is_some_and(|byte| !b",:]}\" \t\n\r[{".contains(&byte))
                {
                    self.at += 1;
                }
                if self.at == start {
                    return None;
                }
                Kind::Scalar
            }
        };
        Some(Node {
            start,
            end: self.at,
            kind,
        })
    }

    fn object(&mut self) -> Option<Kind> {
        self.at += 1;
        let mut members = Vec::new();
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Some(Kind::Object(members));
        }
        loop {
            self.skip_space();
            let start = self.at;
            let key = self.string()?;
            self.expect(b':')?;
            let value = self.value()?;
            members.push(Member { key, start, value });
            self.skip_space();
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(Kind::Object(members));
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self) -> Option<Kind> {
        self.at += 1;
        let mut items = Vec::new();
        self.skip_space();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Some(Kind::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_space();
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(Kind::Array(items));
                }
                _ => return None,
            }
        }
    }

    /// A string at the cursor, decoded.
    fn string(&mut self) -> Option<String> {
        let start = self.at;
        if self.peek() != Some(b'"') {
            return None;
        }
        self.at += 1;
        loop {
            match self.peek()? {
                b'\\' => self.at += 2,
                b'"' => break,
                _ => self.at += 1,
            }
        }
        self.at += 1;
        serde_json::from_str(self.text.get(start..self.at)?).ok()
    }
}
