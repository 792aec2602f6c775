fn main() {
    // A new migration file must rebuild the crate that embeds them.
    println!("cargo:rerun-if-changed=migrations");
}
