//! Signing keys generated at run time, for tests of token verification.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, RSA_PKCS1_SHA256,
    RsaPublicKeyComponents,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

enum Private {
    Ec(EcdsaKeyPair),
    Rsa(aws_lc_rs::rsa::KeyPair),
}

/// A key pair with its key id.
pub struct TestKey {
    pub kid: String,
    private: Private,
}

pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl TestKey {
    pub fn es256(kid: &str) -> Self {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        Self {
            kid: kid.into(),
            private: Private::Ec(pair),
        }
    }

    pub fn rs256(kid: &str) -> Self {
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        Self {
            kid: kid.into(),
            private: Private::Rsa(pair),
        }
    }

    pub fn alg(&self) -> &'static str {
        match self.private {
            Private::Ec(_) => "ES256",
            Private::Rsa(_) => "RS256",
        }
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> Value {
        match &self.private {
            Private::Ec(pair) => {
                let point = pair.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig", "alg": "ES256",
                       "x": b64(&point[1..33]), "y": b64(&point[33..65])})
            }
            Private::Rsa(pair) => {
                let parts = RsaPublicKeyComponents::<Vec<u8>>::from(pair.public_key());
                json!({"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                       "n": b64(&parts.n), "e": b64(&parts.e)})
            }
        }
    }

    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match &self.private {
            Private::Ec(pair) => pair.sign(&rng, message).unwrap().as_ref().to_vec(),
            Private::Rsa(pair) => {
                let mut signature = vec![0; pair.public_modulus_len()];
                pair.sign(&RSA_PKCS1_SHA256, &rng, message, &mut signature)
                    .unwrap();
                signature
            }
        }
    }

    /// A token with this key's alg and kid over `claims`.
    pub fn token(&self, claims: &Value) -> String {
        self.token_with_header(
            &json!({"alg": self.alg(), "typ": "JWT", "kid": self.kid}),
            claims,
        )
    }

    /// A token with any header, signed by this key.
    pub fn token_with_header(&self, header: &Value, claims: &Value) -> String {
        let message = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let signature = self.sign(message.as_bytes());
        format!("{message}.{}", b64(&signature))
    }
}

/// A JWKS document of these keys' public halves.
pub fn jwks_json(keys: &[&TestKey]) -> String {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()}).to_string()
}
