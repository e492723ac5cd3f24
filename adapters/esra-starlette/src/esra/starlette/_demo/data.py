"""Larkspur Cycles: a small fictional enterprise written for the demo.

Three systems: a product catalog, a support desk (tickets and knowledge-base articles) and an
HR handbook. Every row is invented for this project.
"""

from __future__ import annotations

__all__ = ["ARTICLES", "POLICIES", "PRODUCTS", "TICKETS"]

# (sku, name, category, description, price_eur, cost_eur, updated)
PRODUCTS: tuple[tuple[str, str, str, str, float, float, str], ...] = (
    (
        "LC-RD-100",
        "Aurora Road 100",
        "road bike",
        "Lightweight aluminium road bike with carbon fork, 2x11 Shimano 105 drivetrain and "
        "hydraulic disc brakes. Ideal for fast group rides and first sportives.",
        1299.0,
        702.0,
        "2026-09-14",
    ),
    (
        "LC-RD-300",
        "Aurora Road 300 Carbon",
        "road bike",
        "Full carbon frame endurance road bike with electronic shifting, tubeless-ready wheels "
        "and clearance for 32 mm tyres.",
        3499.0,
        1890.0,
        "2026-10-02",
    ),
    (
        "LC-GR-200",
        "Fernweh Gravel 200",
        "gravel bike",
        "Steel gravel bike with flared drop bars, 1x12 drivetrain, mounts for three bottle cages "
        "and racks, and 45 mm tyre clearance for bikepacking.",
        1849.0,
        980.0,
        "2026-08-21",
    ),
    (
        "LC-EB-500",
        "Strom City E-Bike 500",
        "electric bike",
        "Commuter e-bike with a 500 Wh removable battery, mid-drive motor, integrated lights, "
        "mudguards and a rear rack. Range up to 120 km in eco mode.",
        2799.0,
        1650.0,
        "2026-11-03",
    ),
    (
        "LC-EB-750",
        "Strom Cargo E-Bike 750",
        "electric bike",
        "Longtail cargo e-bike carrying two children or 80 kg of shopping; dual battery option "
        "and hydraulic brakes.",
        4299.0,
        2710.0,
        "2026-07-30",
    ),
    (
        "LC-KD-020",
        "Sprout Kids 20",
        "kids bike",
        "20 inch kids bike with low step-over frame, coaster brake and a bell. For riders aged "
        "6 to 9.",
        349.0,
        160.0,
        "2026-05-11",
    ),
    (
        "LC-AC-HLM",
        "Halo Commuter Helmet",
        "accessory",
        "Ventilated commuter helmet with integrated rear LED light and magnetic buckle. Sizes "
        "S, M and L.",
        89.0,
        31.0,
        "2026-06-01",
    ),
    (
        "LC-AC-LCK",
        "Bastion U-Lock",
        "accessory",
        "Hardened steel U-lock with 16 mm shackle and anti-theft rating 9/10; includes frame "
        "mount.",
        74.0,
        22.0,
        "2026-03-19",
    ),
    (
        "LC-AC-BAT",
        "Strom Spare Battery 500 Wh",
        "spare part",
        "Replacement 500 Wh battery for Strom City e-bikes; charges fully in 4.5 hours.",
        649.0,
        402.0,
        "2026-10-20",
    ),
    (
        "LC-AC-TYR",
        "Grip 45 Gravel Tyre",
        "spare part",
        "Tubeless-ready 700x45c gravel tyre with puncture protection belt.",
        54.0,
        19.0,
        "2026-04-08",
    ),
)

# (ticket id, subject, body, product sku, status, region, customer email, internal notes, opened)
TICKETS: tuple[tuple[str, str, str, str, str, str, str, str, str], ...] = (
    (
        "T-1001",
        "E-bike battery not charging",
        "My Strom City battery stays at 40 percent and the charger LED blinks red.",
        "LC-EB-500",
        "open",
        "emea",
        "ana.silva@example.org",
        "Likely faulty charger batch 2026-07.",
        "2026-11-02",
    ),
    (
        "T-1002",
        "Refund for damaged helmet",
        "The helmet arrived with a cracked shell. I would like a refund or a replacement.",
        "LC-AC-HLM",
        "resolved",
        "emea",
        "jonas.weber@example.org",
        "Courier damage, claim filed.",
        "2026-10-11",
    ),
    (
        "T-1003",
        "Gravel bike creaking bottom bracket",
        "After 300 km my Fernweh Gravel 200 creaks when pedalling hard uphill.",
        "LC-GR-200",
        "open",
        "amer",
        "li.chen@example.org",
        "Send BB service guide.",
        "2026-11-15",
    ),
    (
        "T-1004",
        "Disc brakes squeal in the rain",
        "The hydraulic disc brakes on my Aurora Road 100 squeal loudly in wet weather.",
        "LC-RD-100",
        "open",
        "emea",
        "m.rossi@example.org",
        "Pads contamination?",
        "2026-11-20",
    ),
    (
        "T-1005",
        "Cargo bike delivery delayed",
        "My Strom Cargo order is two weeks late; please give me a delivery date.",
        "LC-EB-750",
        "pending",
        "amer",
        "k.okafor@example.org",
        "Supplier backlog on frames.",
        "2026-09-28",
    ),
    (
        "T-1006",
        "Lost U-lock key",
        "I lost both keys of my Bastion U-Lock. Can I order a replacement key?",
        "LC-AC-LCK",
        "resolved",
        "apac",
        "h.tanaka@example.org",
        "Key code on receipt.",
        "2026-08-17",
    ),
    (
        "T-1007",
        "E-bike range lower than advertised",
        "I only get 60 km of range on my Strom City in eco mode, far below 120 km.",
        "LC-EB-500",
        "open",
        "emea",
        "p.novak@example.org",
        "Check tyre pressure and firmware.",
        "2026-11-25",
    ),
    (
        "T-1008",
        "Warranty claim for cracked frame",
        "The carbon frame of my Aurora Road 300 has a crack near the seat tube after a year.",
        "LC-RD-300",
        "escalated",
        "emea",
        "s.dubois@example.org",
        "Frame replacement approved.",
        "2026-10-30",
    ),
)

# (article id, title, body, updated)
ARTICLES: tuple[tuple[str, str, str, str], ...] = (
    (
        "KB-01",
        "Charging and storing Strom batteries",
        "Charge the battery at room temperature. If the charger LED blinks red, reseat the plug "
        "and try a different outlet; a persistent red blink means the charger must be replaced "
        "under warranty. Store batteries at 50 to 70 percent charge over winter.",
        "2026-10-05",
    ),
    (
        "KB-02",
        "Returns and refunds policy",
        "Unused products can be returned within 30 days for a full refund. Items damaged in "
        "transit are replaced or refunded free of charge once a photo of the damage is sent.",
        "2026-06-12",
    ),
    (
        "KB-03",
        "Quieting squealing disc brakes",
        "Squealing disc brakes usually mean contaminated pads or rotors. Clean rotors with "
        "isopropyl alcohol, sand or replace the pads, and bed them in again.",
        "2026-09-01",
    ),
    (
        "KB-04",
        "Frame warranty coverage",
        "Frames carry a lifetime warranty against manufacturing defects for the first owner. "
        "Crash damage is covered by the crash replacement programme at a discount.",
        "2026-02-20",
    ),
    (
        "KB-05",
        "Getting the most range from your e-bike",
        "Range depends on tyre pressure, assist level, temperature and rider weight. Keep tyres "
        "inflated, use eco mode on flat roads and update the motor firmware.",
        "2026-11-10",
    ),
)

# (policy id, title, body, owner team, updated)
POLICIES: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "HR-01",
        "Annual leave and paid time off",
        "Full-time employees receive 28 days of paid time off (PTO) per year plus public "
        "holidays. Up to five unused days carry over to the next year. Request leave at least two "
        "weeks ahead through the HR portal.",
        "People Operations",
        "2026-01-15",
    ),
    (
        "HR-02",
        "Remote work and telework",
        "Employees may work remotely up to three days a week with their manager's approval. A "
        "home-office allowance of 300 EUR is paid once.",
        "People Operations",
        "2026-03-01",
    ),
    (
        "HR-03",
        "Travel and expense reimbursement",
        "Business travel must be booked through the travel desk. Expenses are reimbursed within "
        "30 days when submitted with receipts; meals are reimbursed up to 45 EUR per day.",
        "Finance",
        "2026-04-22",
    ),
    (
        "HR-04",
        "Cycle-to-work scheme",
        "Staff can lease any Larkspur bike through salary sacrifice over 24 months, saving tax "
        "and social contributions. E-bikes are included.",
        "People Operations",
        "2026-05-30",
    ),
    (
        "HR-05",
        "Parental leave",
        "Parents receive 16 weeks of fully paid parental leave, which can be split into blocks "
        "within the first two years.",
        "People Operations",
        "2026-02-10",
    ),
    (
        "HR-06",
        "Security incident reporting",
        "Report lost laptops, phishing emails or suspected data breaches to the security team "
        "within one hour via the VPN-protected incident form.",
        "Security",
        "2026-07-07",
    ),
    (
        "HR-07",
        "Performance reviews and salary bands",
        "Performance reviews happen twice a year. Compensation changes follow published salary "
        "bands reviewed every April.",
        "People Operations",
        "2026-04-01",
    ),
)
